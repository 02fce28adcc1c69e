/*
 * moestream - run Mixture-of-Experts language models whose weights do not fit
 * in RAM by streaming the routed experts from storage on demand.
 *
 * This is the only public header. It is plain C (C99 and C++ compatible).
 *
 * Conventions
 * - Every fallible call returns a moestream_status: 0 is success, negative
 *   values are errors. Values never change between releases.
 * - After an error, moestream_last_error() returns a message for the calling
 *   thread describing the most recent failure. It is never NULL.
 * - Structs passed in or out begin with `struct_size`; initialise them with the
 *   matching *_init() function (or set struct_size = sizeof(the struct)) so the
 *   library can tell which fields the caller knows about. Fields are only ever
 *   appended.
 * - Handles are opaque. A moestream_context may be used by one thread at a
 *   time; different contexts are independent. Calling into one context from two
 *   threads at once is detected where cheap and returns MOESTREAM_ERR_BUSY.
 * - Destructors (moestream_close, moestream_sampler_free) accept NULL.
 *   Closing a handle while another thread is inside a call on it is
 *   undefined behaviour. Where the call has claimed the handle (the calls
 *   that can return MOESTREAM_ERR_BUSY), the destructor detects it: it frees
 *   nothing and sets moestream_last_error (moestream_close also logs it at
 *   MOESTREAM_LOG_ERROR); destroy the handle again once that call has
 *   returned. Calls that do not claim it (the size and token queries, the
 *   tokenizer) are not detected. The Python binding refuses such a close
 *   during any call (Error with status BUSY).
 * - The library never prints on its own; pass a log callback to see messages.
 * - Every file the library writes (state files, packed expert files, generated
 *   models, routing traces, usage profiles) is written to a temporary file of
 *   its own beside the target, synced and renamed over the target, so the
 *   target holds its old contents or the whole new file. On Linux the
 *   temporary has no name until then (O_TMPFILE; it is linked as
 *   .NAME.tmp.XXXXXX just for the rename), so a process killed while writing
 *   leaves nothing behind; where the file system has no unnamed files it is
 *   .NAME.tmp.XXXXXX from the start. A
 *   target that is a symbolic link to a file is followed (the temporary goes
 *   beside the file it names, which is replaced; the link stays); one that is
 *   not a plain file (a pipe, a device, a directory) is refused with
 *   MOESTREAM_ERR_INVALID_ARGUMENT, or, for the usage profile saved by
 *   moestream_close (which returns nothing), not written and logged as a
 *   warning. A target that is one of the model's files (by its name, a
 *   symbolic link or a hard link) would be replaced by what is written: a
 *   state file there is MOESTREAM_ERR_INVALID_ARGUMENT, and so is
 *   moestream_open with such a profile_path or routing_trace_path.
 */
#ifndef MOESTREAM_H
#define MOESTREAM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(MOESTREAM_BUILDING_LIBRARY)
#define MOESTREAM_API __attribute__((visibility("default")))
#else
#define MOESTREAM_API
#endif

#define MOESTREAM_VERSION_MAJOR 0
#define MOESTREAM_VERSION_MINOR 4
#define MOESTREAM_VERSION_PATCH 0
/* MAJOR*10000 + MINOR*100 + PATCH */
#define MOESTREAM_VERSION_NUMBER \
    (MOESTREAM_VERSION_MAJOR * 10000 + MOESTREAM_VERSION_MINOR * 100 + MOESTREAM_VERSION_PATCH)
#define MOESTREAM_VERSION_STRING "0.4.0"

/* Runtime version of the loaded library, as MOESTREAM_VERSION_NUMBER. */
MOESTREAM_API int moestream_version_number(void);
/* Runtime version string, e.g. "0.3.0". Static storage. */
MOESTREAM_API const char *moestream_version_string(void);
/* Instruction set the compute kernels use: "avx512", "avx2" or "scalar" (the
 * best this CPU supports, lowered by MOESTREAM_ISA=scalar|avx2|avx512; other
 * values of MOESTREAM_ISA are ignored). Static storage. */
MOESTREAM_API const char *moestream_kernel_isa(void);

/* ------------------------------------------------------------------------ */
/* Status codes                                                             */

typedef enum moestream_status {
    MOESTREAM_OK = 0,
    MOESTREAM_ERR_INVALID_ARGUMENT = -1, /* NULL handle, bad value, wrong struct_size */
    MOESTREAM_ERR_IO = -2,               /* read/write failed; message carries errno */
    MOESTREAM_ERR_BAD_FORMAT = -3,       /* malformed GGUF, state or packed file */
    MOESTREAM_ERR_UNSUPPORTED = -4,      /* valid input this build cannot handle */
    MOESTREAM_ERR_OUT_OF_MEMORY = -5,    /* allocation failed or budget too small */
    MOESTREAM_ERR_STATE_MISMATCH = -6,   /* state file belongs to another model/shape */
    MOESTREAM_ERR_CONTEXT_FULL = -7,     /* more tokens than n_ctx */
    MOESTREAM_ERR_INTERNAL = -8,         /* a bug: please report */
    MOESTREAM_ERR_BUSY = -9              /* context used from two threads at once */
} moestream_status;

/* Static, never NULL; "unknown status" for values outside the enum. */
MOESTREAM_API const char *moestream_status_string(int status);
/* Message for this thread's most recent error; "" if none. Never NULL.
 * Valid until the next failing call on the same thread. */
MOESTREAM_API const char *moestream_last_error(void);

/* ------------------------------------------------------------------------ */
/* Parameters                                                               */

typedef enum moestream_io_mode {
    MOESTREAM_IO_AUTO = 0,   /* pick by comparing model size with the budget */
    MOESTREAM_IO_MMAP = 1,   /* map the file; the page cache holds experts */
    MOESTREAM_IO_DIRECT = 2, /* O_DIRECT reads into the engine's expert cache */
    MOESTREAM_IO_PREAD = 3   /* buffered pread thread pool (portable fallback) */
} moestream_io_mode;

/* In the mmap mode only the lookahead applies (auto: none): the page cache
 * keeps the previous token's experts anyway, so previous-token has nothing to
 * add there and both acts as lookahead. */
typedef enum moestream_prefetch_mode {
    MOESTREAM_PREFETCH_AUTO = 0,
    MOESTREAM_PREFETCH_OFF = 1,
    MOESTREAM_PREFETCH_PREVIOUS_TOKEN = 2, /* same layer's experts of the previous token */
    MOESTREAM_PREFETCH_LOOKAHEAD = 3,      /* layer L+1's router run on layer L's state */
    MOESTREAM_PREFETCH_BOTH = 4
} moestream_prefetch_mode;

/* Eviction from the engine's expert cache (direct and pread modes). In the
 * mmap mode the kernel's page cache decides what stays, and the engine
 * releases experts least recently used first; the policy and the usage
 * profile do not apply there. */
typedef enum moestream_cache_policy {
    MOESTREAM_CACHE_AUTO = 0,
    MOESTREAM_CACHE_LRU = 1,
    MOESTREAM_CACHE_LFU_DECAY = 2, /* frequency-weighted LRU with decay */
    MOESTREAM_CACHE_PINNED_HOT = 3, /* learned hot set pinned + LFU for the rest */
    MOESTREAM_CACHE_REUSE_AWARE = 4 /* keeps last token's experts by measured reuse, others by routing rate
                                       scaled by how often their layer returns to experts that recent */
} moestream_cache_policy;

/* Where the engine's own large buffers live on a machine with several NUMA
 * nodes: the expert cache, the matrices built at open (deepseek2 files with
 * one attn_kv_b a layer) and, when experts are streamed (direct and pread
 * modes), the copy of the dense weights. The placement is a preference: a
 * node that runs out spills to the others. On one node both are the same. */
typedef enum moestream_numa_placement {
    MOESTREAM_NUMA_LOCAL = 0,     /* the node of the thread that opens the context; a memory
                                     policy the process was given (numactl --membind,
                                     --interleave, --preferred) is kept instead */
    MOESTREAM_NUMA_INTERLEAVE = 1 /* pages spread over every node (every node a numactl
                                     --membind binding allows): the memory bandwidth of
                                     all sockets, for compute threads on all of them */
} moestream_numa_placement;

typedef enum moestream_log_level {
    MOESTREAM_LOG_ERROR = 0,
    MOESTREAM_LOG_WARN = 1,
    MOESTREAM_LOG_INFO = 2,
    MOESTREAM_LOG_DEBUG = 3
} moestream_log_level;

/* Called on the thread making the call. At MOESTREAM_LOG_DEBUG, step, state
 * save and state load each log a line while they hold the context (and the
 * sampler): a call into the same handle from inside the callback, on any
 * thread, returns MOESTREAM_ERR_BUSY. */
typedef void (*moestream_log_fn)(int level, const char *message, void *user_data);

typedef struct moestream_params {
    size_t struct_size;         /* = sizeof(moestream_params) */
    const char *model_path;     /* GGUF file (first shard of a split set) */
    uint64_t memory_budget;     /* bytes for the whole engine; 0 = automatic (80% of the memory
                                   available, within the process's memory cgroup) */
    int32_t n_threads;          /* compute threads; 0 = one per physical core the process may run
                                   on (its CPU affinity, e.g. taskset, and its cgroup's cpuset);
                                   more than 4096 start 4096 */
    int32_t n_ctx;              /* context length; 0 = min(model's, 4096) */
    int32_t io_mode;            /* moestream_io_mode */
    int32_t prefetch;           /* moestream_prefetch_mode */
    int32_t cache_policy;       /* moestream_cache_policy */
    int32_t exact;              /* 1: f32 activations and f32 KV (slow, for checking) */
    const char *packed_path;    /* packed expert file; NULL or "" = look for MODEL.moepack (used when it
                                   matches the model). One named here must be a regular file in every
                                   I/O mode, else open fails with MOESTREAM_ERR_IO; streaming reads it and
                                   refuses one of another model (BAD_FORMAT); mmap mode does not read it */
    const char *profile_path;   /* usage profile; NULL = default beside the model; "" = off. One that is
                                   unusable (malformed, another model's) is ignored with a warning and
                                   replaced at close; one that cannot be read (permissions, I/O error)
                                   is ignored with a warning and left as it is. Close adds this
                                   context's counts to the file as it is then, so contexts of one
                                   model add up; a context that routed no token leaves it untouched */
    moestream_log_fn log_fn;    /* may be NULL */
    void *log_user_data;
    int32_t log_level;          /* highest level passed to log_fn */
    const char *routing_trace_path; /* write every token's routed experts here (docs/trace-format.md); NULL or "" = off.
                                       Written to a temporary file of its own beside PATH (unnamed, or
                                       .NAME.tmp.XXXXXX: see the notes above) and renamed to PATH by moestream_close: until then an earlier file at
                                       PATH stays as it was */
    int32_t lookahead_layers;   /* router lookahead depth (prefetch lookahead/both/auto): the routers of layers
                                   L+1..L+n run on layer L's state; 1..4, 0 = the measured default in
                                   docs/performance.md. Checked (0..4) whatever the prefetch mode. The env
                                   MOESTREAM_LOOKAHEAD_LAYERS=1..4 beats it (0 = the default); another value
                                   fails open */
    int32_t reserved0;          /* unused (0.1's tail padding: callers built against 0.1 pass
                                   sizeof = 104 with whatever their padding held) */
    int32_t numa_placement;     /* moestream_numa_placement (env MOESTREAM_NUMA=local|interleave beats it) */
    int32_t reserved1;          /* unused (0.2/0.3's tail padding: callers built against them pass sizeof = 112
                                   with whatever their padding held) */
    int32_t max_batch;          /* tokens a step runs through the model at once (longer steps go in chunks of
                                   this many); each chunk reads every weight it needs once, so a larger one
                                   makes long prompts faster, most of all when experts are streamed, for
                                   scratch memory taken from the budget (~240 KiB per token for a
                                   Qwen3-30B-A3B shape; sliding-window layers also keep a KV ring of
                                   window + max_batch - 1 positions). 0 = automatic: 64, or 512 / 256 when
                                   experts are streamed (direct, pread) and the budget still holds all but
                                   1/32 of the cache slots 64 would leave (moestream_io_mode_reason then
                                   says "steps in chunks of N tokens"); at most n_ctx. Since 0.4 */
} moestream_params;

/* Fills defaults (struct_size, automatic everything). */
MOESTREAM_API void moestream_params_init(moestream_params *params);

/* ------------------------------------------------------------------------ */
/* Model facts                                                              */

#define MOESTREAM_MAX_TENSOR_TYPES 64

typedef struct moestream_model_info {
    size_t struct_size;          /* = sizeof(moestream_model_info) */
    char architecture[32];       /* general.architecture, e.g. "qwen3moe" */
    char name[96];               /* general.name, may be empty */
    int32_t n_vocab;
    int32_t n_ctx_train;
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t head_dim;
    int32_t n_expert;
    int32_t n_expert_used;
    int32_t n_ff_expert;
    int32_t n_ff_shared;         /* 0 without a shared expert */
    int32_t n_tensors;
    uint64_t file_bytes;         /* all shards */
    uint64_t total_bytes;        /* sum of tensor bytes */
    uint64_t dense_bytes;        /* tensors that stay resident (with the matrices built at open in place
                                    of the tensor they are built from: deepseek2's attn_kv_b) */
    uint64_t expert_bytes;       /* routed expert tensors, all layers */
    uint64_t expert_bytes_per_expert; /* gate+up+down of one expert in one layer (max over layers) */
    uint64_t expert_bytes_per_layer;  /* all experts of one layer (max over layers) */
    uint32_t tensor_count_by_type[MOESTREAM_MAX_TENSOR_TYPES]; /* index = GGML type id */
    int32_t io_mode;             /* what open would choose for the given budget */
    char io_mode_reason[160];
} moestream_model_info;

MOESTREAM_API void moestream_model_info_init(moestream_model_info *info);

/* Name of a GGML tensor type id ("q4_K", ...); "?" when unknown. */
MOESTREAM_API const char *moestream_type_name(int type_id);
/* Name of an I/O mode ("auto", "mmap", "direct", "pread"). */
MOESTREAM_API const char *moestream_io_mode_name(int io_mode);

/* Reads a model's facts without loading weights. memory_budget (0 = automatic)
 * only affects io_mode/io_mode_reason. The file is checked as moestream_open
 * checks it (metadata, and every tensor bound to the architecture by name,
 * shape and type, none left over), reading the tensor table and no weight
 * but the few bytes of rope_freqs.weight: a file open would refuse for its
 * contents (BAD_FORMAT, UNSUPPORTED) is refused with the same status and
 * message (past the function name moestream_last_error starts with). */
MOESTREAM_API int moestream_inspect(const char *model_path, uint64_t memory_budget,
                                    moestream_model_info *out);

/* ------------------------------------------------------------------------ */
/* Context                                                                  */

typedef struct moestream_context moestream_context;

/* Opens the model: indexes the GGUF, maps it, sets up the expert cache and
 * I/O, and has the dense weights read in: when experts are streamed (direct
 * and pread modes) into memory the engine owns (anonymous, NUMA-placed, huge
 * pages advised; the kernel cannot drop it as it drops page cache, only swap
 * it), except the token embeddings, of which a token reads one row (they
 * stay mapped unless they are also the output head); in the mmap mode
 * through the mapping. Either way they count against the budget and are not
 * mlock'ed. params->struct_size is sizeof(moestream_params) or exactly the
 * size of an earlier version's layout (on 64-bit targets 104 for 0.1, 96 and
 * 88 before it); fields past it take their defaults, and any other size is
 * MOESTREAM_ERR_INVALID_ARGUMENT. On failure *out is NULL. For testing how a program
 * copes with failing storage, the environment variable
 * MOESTREAM_FAULT_INJECT makes the expert reads of the context opened fail,
 * come back short or corrupted (docs/errors.md, "Fault injection"). */
MOESTREAM_API int moestream_open(const moestream_params *params, moestream_context **out);
/* Drains I/O, writes the usage profile (unless disabled or nothing was routed) and frees. NULL-safe.
 * While another thread is inside a call on ctx it cannot free safely: see
 * the conventions at the top (the context may stay open). */
MOESTREAM_API void moestream_close(moestream_context *ctx);

MOESTREAM_API int moestream_model_info_get(const moestream_context *ctx, moestream_model_info *out);
MOESTREAM_API int32_t moestream_n_vocab(const moestream_context *ctx); /* -1 on NULL */
MOESTREAM_API int32_t moestream_n_ctx(const moestream_context *ctx);   /* -1 on NULL */
MOESTREAM_API int32_t moestream_n_past(const moestream_context *ctx);  /* tokens in context */
/* Why the context reads experts the way it does and where its memory lives,
 * in full (moestream_stats.io_mode_reason holds the first 159 characters):
 * the I/O mode and its reason, cache slots, read backend, NUMA placement,
 * I/O threads, the dense weights' copy. Fixed at open; valid until close.
 * "" for NULL. */
MOESTREAM_API const char *moestream_io_mode_reason(const moestream_context *ctx);

/* Appends n_tokens tokens and runs them through the model. If logits_out is
 * not NULL, writes the last token's logits (n_vocab floats). On error the
 * context is unchanged (no token of the failed call is kept). */
MOESTREAM_API int moestream_step(moestream_context *ctx, const int32_t *tokens, int32_t n_tokens,
                                 float *logits_out);
/* moestream_step that writes every token's logits: n_tokens * n_vocab floats,
 * token i's at logits_out + i * n_vocab (bit for bit what stepping the tokens
 * one at a time gives). Scoring a text this way (perplexity) reads the output
 * matrix, and each routed expert, once per chunk of tokens instead of once per
 * token. logits_out must not be NULL. Since 0.4. */
MOESTREAM_API int moestream_step_all_logits(moestream_context *ctx, const int32_t *tokens, int32_t n_tokens,
                                            float *logits_out);

/* Forgets all tokens (the expert cache stays warm). */
MOESTREAM_API int moestream_reset(moestream_context *ctx);
/* Keeps the first n_keep tokens and forgets the rest: the next step continues
 * at position n_keep, with the logits stepping only the kept tokens would
 * have given (to regenerate a reply or edit the end of a conversation; step
 * the last kept token again after truncating to n_keep - 1 for its logits).
 * 0 <= n_keep <= n_past (MOESTREAM_ERR_INVALID_ARGUMENT otherwise); 0 is
 * moestream_reset. Models with sliding-window layers keep only a ring of the
 * last n_swa + max_batch - 1 positions there, so once more tokens than that
 * have been stepped they can go back by max_batch tokens at most:
 * MOESTREAM_ERR_UNSUPPORTED beyond (reset and step the kept tokens instead).
 * On error the context is unchanged. A sampler's history is separate
 * (moestream_sampler_reset / _accept). Since 0.4. */
MOESTREAM_API int moestream_truncate(moestream_context *ctx, int32_t n_keep);

/* Writes everything the context needs to continue exactly (tokens, positions,
 * KV cache) atomically: a failure leaves any previous file at path intact.
 * Once the new file has replaced it the call succeeds; if the directory then
 * cannot be synced, a MOESTREAM_LOG_WARN message says so (the new file may
 * not survive a power loss). File format: docs/state-format.md. */
MOESTREAM_API int moestream_state_save(moestream_context *ctx, const char *path);
/* Restores a saved state; on any error the context is left as it was. A
 * sampler section in the file is ignored. */
MOESTREAM_API int moestream_state_load(moestream_context *ctx, const char *path);

/* ------------------------------------------------------------------------ */
/* Statistics                                                               */

#define MOESTREAM_MAX_LAYERS 256

typedef struct moestream_stats {
    size_t struct_size;              /* = sizeof(moestream_stats) */
    uint64_t tokens;                 /* tokens processed by step (a failed step keeps none) */
    uint64_t steps;                  /* steps that succeeded */
    uint64_t compute_ns;             /* time in compute (of the steps that succeeded) */
    uint64_t io_wait_ns;             /* time blocked waiting for expert bytes: in steps, failed ones
                                        included, and in the waits for reads in flight before a
                                        state save or load */
    uint64_t step_ns;                /* wall time inside step (of the steps that succeeded) */
    uint64_t bytes_read_demand;      /* expert bytes read because they were needed now */
    uint64_t bytes_read_prefetch;    /* expert bytes read ahead of need */
    uint64_t bytes_read_wasted;      /* bytes read for nothing: prefetches evicted before use, and the parts
                                        of an expert read that was cancelled or failed */
    uint64_t cache_hits;
    uint64_t cache_misses;
    uint64_t prefetch_issued;
    uint64_t prefetch_useful;
    uint64_t evictions;
    uint64_t resident_bytes;         /* dense + KV + cache + scratch now held */
    uint64_t expert_cache_bytes;     /* capacity of the expert cache */
    uint64_t dense_bytes;
    uint64_t kv_bytes;
    int32_t io_mode;                 /* mode in use */
    int32_t n_layer;                 /* entries valid in the per-layer arrays */
    char io_mode_reason[160];
    uint64_t layer_hits[MOESTREAM_MAX_LAYERS];
    uint64_t layer_misses[MOESTREAM_MAX_LAYERS];
    /* Expert reads as the device saw them (0 in mmap mode, where the kernel
     * reads in page faults). A read is in flight from its submission until
     * the engine takes its completion, which it checks between experts. */
    uint64_t io_busy_ns;             /* wall time with at least one expert read in flight
                                        (overlapping reads count once, idle gaps not at all) */
    uint64_t io_bytes_completed;     /* bytes those reads returned */
    uint64_t io_reads_completed;
    uint64_t io_read_ns;             /* sum over reads of the time each was in flight;
                                        / io_busy_ns = mean reads in flight while busy */
    int32_t io_queue_depth;          /* expert reads the engine keeps in flight at most; 0 = none */
    /* Where compute_ns went. The rest of compute_ns is mostly embedding
     * lookups and the output head. */
    uint64_t attention_ns;           /* attention blocks: norm, projections, RoPE, KV cache, attention */
    uint64_t moe_ns;                 /* MoE blocks: norm, router, routed and shared experts, issuing
                                        expert reads and prefetches (in mmap mode also page faults on
                                        expert bytes), without the blocking waits for expert bytes
                                        (those are io_wait_ns) */
} moestream_stats;

MOESTREAM_API void moestream_stats_init(moestream_stats *stats);
/* struct_size is sizeof(moestream_stats) or exactly the size of an older
 * layout: offsetof(io_busy_ns) (without the io_* fields on) or
 * offsetof(attention_ns) (without attention_ns/moe_ns); fields past it are
 * not written. Any other size is MOESTREAM_ERR_INVALID_ARGUMENT. */
MOESTREAM_API int moestream_stats_get(const moestream_context *ctx, moestream_stats *out);
MOESTREAM_API int moestream_stats_reset(moestream_context *ctx);

/* ------------------------------------------------------------------------ */
/* Expert read log and replay                                               */

/* Starts (or restarts, forgetting earlier entries) a log of the expert reads
 * the context submits from now on: file, offset and length of each, up to
 * `capacity` reads (reserved now: logging never allocates later); reads past
 * it are counted as dropped. capacity 0 stops logging and frees the log.
 * MOESTREAM_ERR_UNSUPPORTED when the context reads experts through a mapping
 * (io mode mmap, or a model held resident): it issues no reads to log. */
MOESTREAM_API int moestream_read_log_start(moestream_context *ctx, uint64_t capacity);

typedef struct moestream_read_replay {
    size_t struct_size;          /* = sizeof(moestream_read_replay) */
    int32_t queue_depth;         /* in: reads kept in flight; 0 = the engine's queue depth */
    int32_t engine_queue_depth;  /* out: the engine's queue depth */
    uint64_t reads;              /* out: reads replayed (the log's entries) */
    uint64_t dropped;            /* out: reads the log had no room for (not replayed) */
    uint64_t bytes;              /* out: bytes read */
    uint64_t elapsed_ns;         /* out: first submission to last completion */
    uint64_t buffered_reads;     /* out: reads O_DIRECT could not take (filesystem refused, unaligned) */
    char backend[16];            /* out: "io_uring" or "pread" */
} moestream_read_replay;

MOESTREAM_API void moestream_read_replay_init(moestream_read_replay *replay);
/* Reads again, with O_DIRECT and the engine's own read backend, exactly the
 * reads in the log (same files, offsets, lengths and order), queue_depth at
 * a time, and reports how long the device took: bytes / elapsed_ns is the
 * device's bandwidth for the engine's own request pattern. Waits for the
 * engine's reads in flight first (queued prefetches are dropped); the log is
 * kept, and reads the engine issues afterwards are appended to it.
 * MOESTREAM_ERR_INVALID_ARGUMENT when no log was started;
 * MOESTREAM_ERR_UNSUPPORTED as for moestream_read_log_start. */
MOESTREAM_API int moestream_read_log_replay(moestream_context *ctx, moestream_read_replay *replay);

/* ------------------------------------------------------------------------ */
/* Tokenizer                                                                */

/* Tokenizes text (text_len bytes, need not be NUL-terminated). Writes at most
 * capacity ids to tokens_out and the total count to *n_out; if the count
 * exceeds capacity, returns MOESTREAM_ERR_INVALID_ARGUMENT with *n_out set so
 * the caller can retry. add_special: BOS/EOS as the model asks;
 * parse_special: match control tokens written in the text. */
MOESTREAM_API int moestream_tokenize(const moestream_context *ctx, const char *text, size_t text_len,
                                     int32_t add_special, int32_t parse_special,
                                     int32_t *tokens_out, size_t capacity, size_t *n_out);
/* Writes the bytes of one token's text (not NUL-terminated) and its length.
 * Ids past the tokenizer's list but within the model's vocabulary (rows a
 * vocabulary was padded with) have no text: length 0. */
MOESTREAM_API int moestream_token_to_piece(const moestream_context *ctx, int32_t token, char *buf,
                                           size_t capacity, size_t *n_out);
MOESTREAM_API int32_t moestream_token_bos(const moestream_context *ctx); /* -1 if none */
MOESTREAM_API int32_t moestream_token_eos(const moestream_context *ctx); /* -1 if none */

/* ------------------------------------------------------------------------ */
/* Sampling                                                                 */

typedef struct moestream_sampler moestream_sampler;

typedef struct moestream_sampler_params {
    size_t struct_size;  /* = sizeof(moestream_sampler_params) */
    float temperature;   /* 0 = greedy */
    int32_t top_k;       /* 0 = off */
    float top_p;         /* 1 = off */
    float min_p;         /* 0 = off */
    uint64_t seed;
    /* Since 0.4: repetition penalties over the last penalty_last_n tokens of
     * the sampler's history (see moestream_sample). A caller built against
     * the earlier struct (ending at seed) passes its smaller struct_size and
     * gets the penalties off. */
    float repeat_penalty;    /* > 0; a seen token's positive logit is divided by it, a negative one multiplied; 1 = off
                                (below 1 favours seen tokens) */
    float presence_penalty;  /* subtracted once from a seen token's logit; 0 = off; negative favours seen tokens */
    float frequency_penalty; /* subtracted once per occurrence in the window; 0 = off; negative favours seen tokens */
    int32_t penalty_last_n;  /* the window: the last 0 .. MOESTREAM_SAMPLER_MAX_PENALTY_LAST_N tokens (0 = penalties
                                off), or -1 for the whole history (see below) */
} moestream_sampler_params;

/* The largest penalty_last_n. penalty_last_n -1 counts every token recorded
 * since moestream_sampler_new or moestream_sampler_reset: the whole context
 * when the sampler is fed the prompt and reset along with the context. The
 * sampler does not know the context's length, so its history then holds the
 * largest window (the last MOESTREAM_SAMPLER_MAX_PENALTY_LAST_N tokens). */
#define MOESTREAM_SAMPLER_MAX_PENALTY_LAST_N 65536

/* Defaults: temperature 0.8, top_k 40, top_p 0.95, min_p 0.05, seed 0;
 * repeat_penalty 1, presence_penalty 0, frequency_penalty 0 (all penalties
 * off), penalty_last_n 64. */
MOESTREAM_API void moestream_sampler_params_init(moestream_sampler_params *params);
/* Invalid values (temperature < 0 or not finite, top_k < 0, top_p outside
 * (0, 1], min_p outside [0, 1], repeat_penalty <= 0 or not finite,
 * presence_penalty or frequency_penalty not finite, penalty_last_n below -1
 * or above MOESTREAM_SAMPLER_MAX_PENALTY_LAST_N) give
 * MOESTREAM_ERR_INVALID_ARGUMENT naming the field. struct_size is this header's size or the
 * earlier layout's, offsetof(moestream_sampler_params, repeat_penalty). The sampler's token
 * history, a ring of penalty_last_n ids (4 bytes each; MOESTREAM_SAMPLER_MAX_PENALTY_LAST_N
 * of them for -1), is allocated here. */
MOESTREAM_API int moestream_sampler_new(const moestream_sampler_params *params, moestream_sampler **out);
/* NULL-safe. While another thread is inside a call on the sampler, frees
 * nothing (see the conventions at the top). */
MOESTREAM_API void moestream_sampler_free(moestream_sampler *sampler);
/* Picks a token from n_vocab logits and records it in the sampler's history.
 * First, when a penalty is on, each distinct token among the last
 * penalty_last_n of the history (all of it for -1; ids >= n_vocab are
 * skipped), seen c times there, has its logit l changed, in float
 * arithmetic, to
 *     l = l > 0 ? l / repeat_penalty : l * repeat_penalty;
 *     l = l - (c * frequency_penalty + presence_penalty);
 * (on a copy: the caller's row is not written). Negative presence or
 * frequency penalties raise seen tokens' logits; a result beyond float's
 * range becomes +-inf (and +inf is picked as below). This applies to greedy too.
 * Greedy picks the largest logit (lowest id
 * on ties). Otherwise p = softmax(logits / temperature), then min-p, top-k and
 * top-p filter, and a token is drawn with the sampler's seeded xoshiro256**
 * generator: the same seed and logits give the same token sequence.
 * NaN logits are never picked (they count as -inf). If any logit is +inf,
 * the lowest id holding +inf is picked, whatever the temperature and filters
 * (the generator does not advance). A row with neither a finite nor a +inf
 * logit (only NaN and -inf) is MOESTREAM_ERR_INVALID_ARGUMENT. One thread at
 * a time per sampler (MOESTREAM_ERR_BUSY otherwise); samplers are
 * independent. No allocation per call once a row of this length has been
 * sampled (with penalties on, a copy of the row and a count per id, 8 bytes
 * per vocabulary entry, are allocated on the first call). */
MOESTREAM_API int moestream_sample(moestream_sampler *sampler, const float *logits, int32_t n_vocab,
                                   int32_t *token_out);
/* Records n tokens the sampler did not draw (the prompt, or tokens the caller
 * picked itself), oldest first, in its history, as if drawn: the penalties
 * then count them. tokens may be NULL when n is 0. n < 0 or a negative id is
 * MOESTREAM_ERR_INVALID_ARGUMENT, and then nothing is recorded. Since 0.4. */
MOESTREAM_API int moestream_sampler_accept(moestream_sampler *sampler, const int32_t *tokens, int32_t n);
/* Returns the sampler to the state moestream_sampler_new left it in: the
 * history is emptied and the generator restarts from the seed (the
 * parameters stay). Pair it with moestream_reset for a new conversation.
 * Since 0.4. */
MOESTREAM_API int moestream_sampler_reset(moestream_sampler *sampler);
/* The sampler's parameters (after moestream_state_load_with_sampler, the
 * restored ones). A struct of the earlier layout's size gets the fields up
 * to seed; nothing past out->struct_size bytes is written. */
MOESTREAM_API int moestream_sampler_params_get(const moestream_sampler *sampler, moestream_sampler_params *out);

/* State files with the sampler (docs/state-format.md, "Sampler section").
 * moestream_state_save_with_sampler also stores the sampler's parameters,
 * generator state and token history, so that a context and sampler loaded
 * from the file draw
 * the same tokens as the ones saved would have. sampler may be NULL (then it
 * is moestream_state_save). Both handles are claimed for the call
 * (MOESTREAM_ERR_BUSY if either is in use).
 * moestream_state_load_with_sampler restores the context and replaces the
 * sampler's parameters, generator state and history with the saved ones (a
 * file written before 0.4 has no history: penalties off, an empty history,
 * penalty_last_n 64). Everything,
 * the sampler section included, is verified first: on any error neither the
 * context nor the sampler changes. A file saved without a sampler gives
 * MOESTREAM_ERR_STATE_MISMATCH when sampler is not NULL; sampler NULL loads
 * the context alone (as moestream_state_load). */
MOESTREAM_API int moestream_state_save_with_sampler(moestream_context *ctx, const moestream_sampler *sampler,
                                                    const char *path);
MOESTREAM_API int moestream_state_load_with_sampler(moestream_context *ctx, moestream_sampler *sampler,
                                                    const char *path);

/* ------------------------------------------------------------------------ */
/* Model generator                                                          */

/* Progress of a long operation: `done` of `total` units (bytes). */
typedef void (*moestream_progress_fn)(uint64_t done, uint64_t total, void *user_data);

/* A random-weight model with the shape of a real architecture, for demos,
 * benchmarks and tests. Weights are valid quant blocks whose scales keep
 * activations finite; routers have clear top-k margins. Zero / NULL fields
 * take the preset's value. Each shape field is at most its
 * MOESTREAM_GENERATE_MAX_* below (beyond any real model; larger values are
 * MOESTREAM_ERR_INVALID_ARGUMENT); n_head_kv and n_expert_used share the
 * n_head and n_expert limits. */
#define MOESTREAM_GENERATE_MAX_LAYERS MOESTREAM_MAX_LAYERS
#define MOESTREAM_GENERATE_MAX_EMBD 65536
#define MOESTREAM_GENERATE_MAX_HEADS 1024
#define MOESTREAM_GENERATE_MAX_HEAD_DIM 1024
#define MOESTREAM_GENERATE_MAX_EXPERTS 4096
#define MOESTREAM_GENERATE_MAX_FF_EXPERT 65536
#define MOESTREAM_GENERATE_MAX_VOCAB 1048576
typedef struct moestream_generate_params {
    size_t struct_size;          /* = sizeof(moestream_generate_params) */
    const char *architecture;    /* "qwen3moe", "gpt-oss" or "deepseek2" (NULL = the preset's:
                                    "gpt-oss" for the gpt-oss-* presets, "deepseek2" for
                                    deepseek-v2-lite and deepseek2-tiny, else "qwen3moe"); deepseek2
                                    only with its own presets, whose latent attention sizes, dense
                                    lead, shared experts and routing are fixed (n_head_kv is 1,
                                    head_dim is qk_nope + qk_rope) */
    const char *preset;          /* "qwen3-30b-a3b", "gpt-oss-20b", "gpt-oss-tiny", "deepseek-v2-lite",
                                    "deepseek2-tiny", "demo", "small", "tiny" (NULL = "small") */
    const char *quant;           /* "q4_k_m", "q3_k_m", "q2_k", "iq4_xs", "q8_0", "f32" (NULL = "q4_k_m") */
    int32_t n_layer;
    int32_t n_embd;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t head_dim;
    int32_t n_expert;
    int32_t n_expert_used;
    int32_t n_ff_expert;
    int32_t n_vocab;
    uint64_t seed;               /* same parameters and seed = same bytes */
    moestream_progress_fn progress; /* may be NULL; called with bytes written */
    void *progress_user_data;
    int32_t deepseek2_attn_kv_b; /* deepseek2 only: nonzero writes, per layer, one F32 attn_kv_b and the
                                    metadata of files converted before absorbed latent attention instead
                                    of attn_k_b / attn_v_b, holding the same weights (0 = split layout).
                                    Earlier layouts end before this field (their struct_size is accepted) */
} moestream_generate_params;

MOESTREAM_API void moestream_generate_params_init(moestream_generate_params *params);
/* Size in bytes of the file moestream_generate_model would write. */
MOESTREAM_API int moestream_generate_model_size(const moestream_generate_params *params, uint64_t *bytes_out);
/* Writes the model to path (through a temporary file renamed at the end, so
 * an interrupted run never leaves a partial model at path). */
MOESTREAM_API int moestream_generate_model(const moestream_generate_params *params, const char *path);

/* ------------------------------------------------------------------------ */
/* Routing traces (file format: docs/trace-format.md)                       */

/* Synthetic routing traces with real models' statistics. */
typedef struct moestream_trace_synth_params {
    size_t struct_size;          /* = sizeof(moestream_trace_synth_params) */
    const char *heat_path;       /* JSON with per-layer expert routing counts ("heat"); NULL = Zipf */
    int32_t n_layer;             /* without heat: 0 = 48 */
    int32_t n_expert;            /* without heat: 0 = 128 */
    int32_t n_expert_used;       /* 0 = the heat file's "k", else 8 */
    int64_t n_tokens;            /* 0 = 1000 */
    double reuse;                /* share of a layer's experts reused from the previous token; < 0 = 0.4; NaN refused */
    double skew;                 /* Zipf exponent without heat; < 0 = 0.47 (top 20% take ~40%); NaN refused */
    uint64_t bytes_per_expert;   /* recorded for byte counts; 0 = a Qwen3-30B-A3B Q4_K_M expert */
    uint64_t seed;
    /* Since 0.3: locality over several tokens. A draw that is not a reuse comes,
       with probability `recall`, from the experts the layer used in its last
       `window` tokens. 0 / 0 = a token depends only on its predecessor. */
    uint32_t window;             /* tokens; at most 65536 */
    double recall;               /* in [0, 1]; above 0 only with a window */
} moestream_trace_synth_params;

MOESTREAM_API void moestream_trace_synth_params_init(moestream_trace_synth_params *params);
MOESTREAM_API int moestream_trace_synth(const moestream_trace_synth_params *params, const char *path);

typedef struct moestream_trace_info {
    size_t struct_size;          /* = sizeof(moestream_trace_info) */
    int32_t n_layer;
    int32_t n_expert;
    int32_t n_expert_used;
    int64_t n_tokens;
    uint64_t bytes_per_expert;
    uint64_t expert_bytes;       /* n_layer * n_expert * bytes_per_expert */
    double reuse;                /* measured share of experts also used by the previous token */
    double top20_share_median;   /* median over layers of the top 20% experts' share of routings */
    double top20_share_min;
    double top20_share_max;
} moestream_trace_info;

MOESTREAM_API void moestream_trace_info_init(moestream_trace_info *info);
MOESTREAM_API int moestream_trace_info_get(const char *path, moestream_trace_info *out);

/* Offline-optimal (Belady) cache; accepted only by moestream_trace_replay. */
#define MOESTREAM_REPLAY_BELADY 100

/* Simulates the expert cache on a trace with the engine's own policies. */
typedef struct moestream_replay_params {
    size_t struct_size;          /* = sizeof(moestream_replay_params) */
    const char *trace_path;
    uint64_t cache_bytes;        /* expert cache capacity */
    int32_t cache_policy;        /* moestream_cache_policy or MOESTREAM_REPLAY_BELADY */
    double warmup_share;         /* leading share of tokens that warms the cache and forms the
                                    usage profile; not counted. < 0 = 0.5 */
} moestream_replay_params;

typedef struct moestream_replay_result {
    size_t struct_size;          /* = sizeof(moestream_replay_result) */
    int32_t cache_policy;        /* the policy simulated (AUTO resolved) */
    uint32_t capacity_slots;     /* experts the cache holds */
    uint64_t accesses;
    uint64_t hits;
    uint64_t misses;
    uint64_t bytes_read;
    double hit_rate;
} moestream_replay_result;

MOESTREAM_API void moestream_replay_params_init(moestream_replay_params *params);
MOESTREAM_API void moestream_replay_result_init(moestream_replay_result *result);
MOESTREAM_API int moestream_trace_replay(const moestream_replay_params *params, moestream_replay_result *out);
/* Name of a cache policy ("auto", "lru", "lfu-decay", "pinned-hot", "reuse-aware", "belady"); "?" if
 * unknown. */
MOESTREAM_API const char *moestream_cache_policy_name(int cache_policy);

/* ------------------------------------------------------------------------ */
/* Packed expert file                                                       */

/* Writes a packed expert file for a model: every routed expert (gate, up and
 * down of one layer) as one 4 KiB-aligned extent with a checksummed header,
 * tied to the model by a fingerprint of its GGUF header. out_path NULL =
 * MODEL_PATH.moepack. Written through a temporary file renamed at the end;
 * an out_path that is one of the model's files is MOESTREAM_ERR_INVALID_ARGUMENT. */
MOESTREAM_API int moestream_pack(const char *model_path, const char *out_path);
/* Reads every extent of a packed file and checks its header and checksum.
 * Writes the counts (either pointer may be NULL); returns MOESTREAM_OK when
 * every expert is intact, MOESTREAM_ERR_BAD_FORMAT naming the first damaged
 * one otherwise. When model_path is not NULL, also checks the file belongs
 * to that model and that every expert equals the model's bytes. */
MOESTREAM_API int moestream_pack_verify(const char *packed_path, const char *model_path, uint64_t *experts_checked,
                                        uint64_t *bad_experts);

#ifdef __cplusplus
}
#endif

#endif /* MOESTREAM_H */
