// moestream run: generation from a text prompt (-p, or -f for a file or
// standard input; tokenized with the model's tokenizer; prints the generated
// text and stops at end of sequence)
// or from token ids (--tokens; prints the generated ids), then the prompt /
// generation speed. Greedy unless a sampling option is given (then the
// library's seeded sampler, its defaults for the options not given).
// Repetition penalties apply to greedy and sampling alike: given alone they
// keep greedy (the library's sampler at temperature 0). The sampler is then
// fed the prompt (moestream_sampler_accept), so the penalties count it.
// --load-state continues a saved session (the prompt is appended to it);
// --save-state writes the session at the end, every generated token stepped,
// with the sampler (generator and token history) when there is one, so that a
// later run continues exactly where this one stopped.
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli_tokens.hpp"
#include "cli_util.hpp"
#include "input_choice.hpp"
#include "model_options.hpp"

namespace cli {
namespace {

void print_help() {
    std::printf("usage: moestream run -m MODEL (-p TEXT | -f FILE | --tokens 1,2,3) [-n 32] [sampling] [state] [model options]\n"
                "  -p, --prompt TEXT        prompt text; prints the generated text, stops at end of sequence\n"
                "  -f, --file FILE          prompt text from FILE (- for standard input), as -p\n"
                "  --tokens LIST            prompt token ids instead; prints the generated ids\n"
                "  -n, --n-predict N        tokens to generate (default 32); a loaded session, the prompt and N tokens\n"
                "                           must fit in the context (-c), else the run is refused before it starts\n"
                "sampling (greedy when none is given; the others then take the library's defaults):\n"
                "  --temp, --temperature T  temperature (0 = greedy; default 0.8)\n"
                "  --top-k K                keep the K most likely tokens (0 = off; default 40)\n"
                "  --top-p P                keep the most likely tokens up to probability P (1 = off; default 0.95)\n"
                "  --min-p P                drop tokens below P x the most likely one (0 = off; default 0.05)\n"
                "  --seed N                 the sampler's seed (default 0): the same seed gives the same text\n"
                "repetition penalties over the last --repeat-last-n tokens, prompt included (off unless given; alone\n"
                "they keep greedy, with a sampling option they apply before it):\n"
                "  --repeat-penalty R       divide a seen token's positive logit by R, multiply a negative one (1 = off)\n"
                "  --presence-penalty P     subtract P from a seen token's logit (0 = off; negative favours it)\n"
                "  --frequency-penalty F    subtract F per occurrence of a token (0 = off; negative favours it)\n"
                "  --repeat-last-n N        the window: the last N tokens (default 64, 0..65536; -1 = all of them,\n"
                "                           up to 65536)\n"
                "state:\n"
                "  --load-state FILE        continue the session saved in FILE (the prompt is appended to it); a\n"
                "                           run with a sampling or penalty option continues the saved sampler\n"
                "                           (its parameters and history) when FILE has one\n"
                "  --save-state FILE        save the session (prompt and generated tokens, the sampler when\n"
                "                           there is one) to FILE at the end\n%s",
                kModelOptionsHelp);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// What gives the prompt: text (-p), a file of text (-f) or token ids (--tokens).
enum class PromptSource { text, file, tokens };

struct RunOptions {
    std::vector<int32_t> prompt;
    std::string load_state, save_state;
    int64_t n_gen = 32;
    bool sampling = false;   // any sampling option given
    bool penalties = false;  // any repetition penalty option given
    moestream_sampler_params sampler{};
};

// A sampler field (a float) in `range`: the values moestream_sampler_new
// takes, refused here in the words of every other option rather than in the
// library's. The range is checked on the float the library gets: a number
// past the float range ("1e39") would be infinite, and one that rounds to an
// open end ("--top-p 1e-50" to 0) would be outside it.
float float_option(const std::string &s, const char *option, RealRange range) {
    double v = 0;
    if (!parse_double_in(s, range, v) || !std::isfinite(float(v)) || !range.contains(double(float(v))))
        throw std::runtime_error(real_range_error(option, s, range));
    return float(v);
}

void seed_option(const std::string &s, uint64_t &seed) {
    if (!parse_seed(s, seed)) throw std::runtime_error(seed_error("--seed", s));
}

// Reads one repetition penalty option at args[i]; false when args[i] is not one.
bool parse_penalty_option(const Args &args, size_t &i, RunOptions &o) {
    const std::string &a = args[i];
    moestream_sampler_params &p = o.sampler;
    if (a == "--repeat-penalty")
        p.repeat_penalty = float_option(option_value(args, i), "--repeat-penalty", RealRange::positive());
    else if (a == "--presence-penalty")
        p.presence_penalty = float_option(option_value(args, i), "--presence-penalty", RealRange::any());
    else if (a == "--frequency-penalty")
        p.frequency_penalty = float_option(option_value(args, i), "--frequency-penalty", RealRange::any());
    else if (a == "--repeat-last-n")
        p.penalty_last_n = int32_t(int_option(option_value(args, i), "--repeat-last-n", -1, MOESTREAM_SAMPLER_MAX_PENALTY_LAST_N));
    else return false;
    o.penalties = true;
    return true;
}

// Reads one sampling option at args[i]; false when args[i] is not one.
bool parse_sampling_option(const Args &args, size_t &i, RunOptions &o) {
    const std::string &a = args[i];
    moestream_sampler_params &p = o.sampler;
    if (a == "--temp" || a == "--temperature")
        p.temperature = float_option(option_value(args, i), "--temp", RealRange::at_least(0));
    else if (a == "--top-k") p.top_k = int32_t(int_option(option_value(args, i), "--top-k", 0, std::numeric_limits<int32_t>::max()));
    else if (a == "--top-p") p.top_p = float_option(option_value(args, i), "--top-p", RealRange::above_to(0, 1));
    else if (a == "--min-p") p.min_p = float_option(option_value(args, i), "--min-p", RealRange::from_to(0, 1));
    else if (a == "--seed") seed_option(option_value(args, i), p.seed);
    else return false;
    o.sampling = true;
    return true;
}

using SamplerPtr = std::unique_ptr<moestream_sampler, void (*)(moestream_sampler *)>;

// Picks the next token: the argmax, or a draw of the sampler. -1 after
// printing why nothing could be picked.
int32_t pick_token(moestream_sampler *sampler, const std::vector<float> &logits) {
    if (!sampler) {
        const int32_t t = greedy_token(logits);
        if (t < 0) std::fprintf(stderr, "moestream run: %s\n", kNoGreedyToken);
        return t;
    }
    int32_t t = -1;
    if (const int st = moestream_sample(sampler, logits.data(), int32_t(logits.size()), &t); st != MOESTREAM_OK) {
        report_error("run", "moestream_sample", st);
        return -1;
    }
    return t;
}

// Restores the saved session. A sampling run takes the file's sampler too when
// it has one: a file saved without one fails the joint load with
// state_mismatch, and then loading the context alone tells a missing sampler
// section (it loads) from a file of another model (it fails again).
bool load_session(moestream_context *ctx, moestream_sampler *sampler, const std::string &path) {
    if (sampler) {
        const int st = moestream_state_load_with_sampler(ctx, sampler, path.c_str());
        if (st == MOESTREAM_OK) {
            moestream_sampler_params p;
            moestream_sampler_params_init(&p);
            moestream_sampler_params_get(sampler, &p);
            std::fprintf(stderr,
                         "moestream run: continuing the saved sampler (temp %g, top-k %d, top-p %g, min-p %g, "
                         "repeat-penalty %g, presence-penalty %g, frequency-penalty %g, repeat-last-n %d)\n",
                         double(p.temperature), p.top_k, double(p.top_p), double(p.min_p), double(p.repeat_penalty),
                         double(p.presence_penalty), double(p.frequency_penalty), p.penalty_last_n);
            return true;
        }
        if (st != MOESTREAM_ERR_STATE_MISMATCH) {
            report_error("run", "moestream_state_load_with_sampler", st);
            return false;
        }
    }
    if (const int st = moestream_state_load(ctx, path.c_str()); st != MOESTREAM_OK) {
        report_error("run", "moestream_state_load", st);
        return false;
    }
    return true;
}

// Whether the context holds the loaded session, the prompt and every token
// -n asks for, so that a run which cannot finish fails before it prints
// anything rather than after the tokens that fit; false after saying what to
// pass instead.
bool fits_in_context(moestream_context *ctx, const RunOptions &o) {
    const int64_t n_ctx = moestream_n_ctx(ctx), past = moestream_n_past(ctx);
    const int64_t prompt = int64_t(o.prompt.size()), need = past + prompt + o.n_gen;
    if (need <= n_ctx) return true;
    const std::string what = past ? std::to_string(past) + " tokens of the loaded session, the prompt's " +
                                        std::to_string(prompt)
                                  : "prompt's " + std::to_string(prompt) + " tokens";
    const int64_t most = n_ctx - past - prompt;  // the largest -n that fits
    const std::string fewer = most > 0 ? ", or -n " + std::to_string(most) + " or less" : "";
    std::fprintf(stderr, "moestream run: the %s and -n %lld need %lld tokens, but the context holds %lld: "
                 "pass -c %lld or more%s\n", what.c_str(), (long long)o.n_gen, (long long)need, (long long)n_ctx,
                 (long long)need, fewer.c_str());
    return false;
}

}  // namespace

int cmd_run(const Args &given) {
    Args args = given;  // "--name=value" split as the loop reaches it
    ModelOptions opt;
    RunOptions o;
    InputChoice<PromptSource> source("prompt", {{PromptSource::text, "--prompt", "-p"},
                                                {PromptSource::file, "--file", "-f", true},
                                                {PromptSource::tokens, "--tokens", nullptr}});
    moestream_sampler_params_init(&o.sampler);
    bool help = false;
    try {
        read_options(args, [&](size_t &i) {
            const std::string &a = args[i];
            if (a == "--help" || a == "-h") {
                help = true;
                return false;
            }
            if (parse_model_option(args, i, opt) || parse_sampling_option(args, i, o) || parse_penalty_option(args, i, o))
                return true;
            if (source.parse(args, i)) {
                if (source.source() == PromptSource::tokens) o.prompt = token_list_option(source.value());
            } else if (a == "-n" || a == "--n-predict") o.n_gen = int_option(option_value(args, i), a.c_str(), 0, std::numeric_limits<int32_t>::max());
            else if (a == "--load-state") o.load_state = file_name_option(option_value(args, i), a);
            else if (a == "--save-state") o.save_state = file_name_option(option_value(args, i), a);
            else throw std::runtime_error(unknown_argument(a));
            return true;
        });
        if (help) {
            print_help();
            return 0;
        }
        if (opt.model_path.empty() || !source.given())
            throw std::runtime_error("-m and one of -p / -f / --tokens are required");
    } catch (const std::exception &e) {
        return usage_error("run", e.what());
    }
    SamplerPtr sampler(nullptr, moestream_sampler_free);
    if (o.penalties && !o.sampling) o.sampler.temperature = 0.0f;  // penalised greedy
    if (o.sampling || o.penalties) {
        moestream_sampler *raw = nullptr;
        if (moestream_sampler_new(&o.sampler, &raw) != MOESTREAM_OK) return usage_error("run", moestream_last_error());
        sampler.reset(raw);
    }
    // A text prompt prints text and stops at end of sequence; token ids print ids.
    const bool text_mode = source.source() != PromptSource::tokens;
    // -f - reads standard input, which the state file cannot destroy.
    const bool from_stdin = source.source() == PromptSource::file && source.value() == "-";
    const std::string text_file = source.source() == PromptSource::file && !from_stdin ? source.value() : "";
    // Input that cannot be read, and a state file that would replace an
    // input, are failures at run time, found before the model is opened.
    std::string text = source.source() == PromptSource::text ? source.value() : "";
    try {
        if (source.source() == PromptSource::file) text = read_input_file(from_stdin ? "/dev/stdin" : text_file);
    } catch (const std::runtime_error &e) {
        std::fprintf(stderr, "moestream run: %s\n", e.what());
        return 1;
    }
    if (!o.save_state.empty()) {
        const std::vector<std::string> inputs = model_and_text_files(opt.model_path, opt.packed_path, text_file);
        if (const std::string why = output_conflict(o.save_state, inputs); !why.empty()) {
            std::fprintf(stderr, "moestream run: %s\n", why.c_str());
            return 1;
        }
    }
    std::unique_ptr<moestream_context, void (*)(moestream_context *)> owned(open_model(opt, "run"), moestream_close);
    moestream_context *ctx = owned.get();
    if (!ctx) return 1;
    if (!o.load_state.empty() && !load_session(ctx, sampler.get(), o.load_state)) return 1;
    // A continued session has its beginning-of-sequence token already.
    const bool continuing = moestream_n_past(ctx) > 0;
    if (text_mode && !tokenize_text(ctx, text, !continuing, true, o.prompt, "run")) return 1;
    if (o.prompt.empty()) {
        std::fprintf(stderr, "moestream run: the prompt has no tokens\n");
        return 1;
    }
    if (!fits_in_context(ctx, o)) return 1;
    if (sampler) {
        const int st = moestream_sampler_accept(sampler.get(), o.prompt.data(), int32_t(o.prompt.size()));
        if (st != MOESTREAM_OK) {
            report_error("run", "moestream_sampler_accept", st);
            return 1;
        }
    }
    const int32_t eos = text_mode ? moestream_token_eos(ctx) : -1;
    std::string piece;
    std::vector<float> logits(size_t(moestream_n_vocab(ctx)));
    auto t0 = std::chrono::steady_clock::now();
    int st = moestream_step(ctx, o.prompt.data(), int32_t(o.prompt.size()), logits.data());
    if (st != MOESTREAM_OK) {
        report_error("run", "moestream_step", st);
        return 1;
    }
    const double prompt_s = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    int64_t generated = 0;
    int32_t unstepped = -1;  // the last token printed, when the loop ended before stepping it
    for (; generated < o.n_gen; ++generated) {
        const int32_t next = pick_token(sampler.get(), logits);
        if (next < 0) {
            std::printf("\n");
            std::fprintf(stderr, "moestream run: stopped after %lld generated tokens\n", (long long)generated);
            return 1;
        }
        if (text_mode) {
            if (next == eos) break;
            if (!token_piece(ctx, next, piece, "run")) return 1;
            std::fwrite(piece.data(), 1, piece.size(), stdout);
        } else {
            std::printf("%d%s", next, generated + 1 < o.n_gen ? " " : "");
        }
        // Output that cannot be written (a reader gone while SIGPIPE is
        // ignored, a full disk) ends the run: the tokens to come would reach no one.
        if (!flush_stdout()) {
            std::fprintf(stderr, "moestream run: cannot write output: %s\n", std::strerror(errno));
            std::clearerr(stdout);  // reported, with its cause: main's final check need not repeat it
            return 1;
        }
        if (generated + 1 == o.n_gen) {
            ++generated;
            unstepped = next;
            break;
        }
        st = moestream_step(ctx, &next, 1, logits.data());
        if (st != MOESTREAM_OK) {
            std::printf("\n");
            report_error("run", "moestream_step", st);
            return 1;
        }
    }
    const double gen_s = seconds_since(t0);
    std::printf("\n");
    flush_stdout();
    std::fprintf(stderr, "prompt: %zu tokens in %.3f s (%.2f tok/s); generated %lld tokens in %.3f s (%.2f tok/s)\n",
                 o.prompt.size(), prompt_s, prompt_s > 0 ? double(o.prompt.size()) / prompt_s : 0.0,
                 static_cast<long long>(generated), gen_s,
                 gen_s > 0 && generated > 1 ? double(generated - 1) / gen_s : 0.0);
    if (!o.save_state.empty()) {
        // The session holds every token printed, so the last one is stepped first.
        if (unstepped >= 0 && (st = moestream_step(ctx, &unstepped, 1, nullptr)) != MOESTREAM_OK) {
            report_error("run", "moestream_step", st);
            return 1;
        }
        if ((st = moestream_state_save_with_sampler(ctx, sampler.get(), o.save_state.c_str())) != MOESTREAM_OK) {
            report_error("run", "moestream_state_save_with_sampler", st);
            return 1;
        }
    }
    return 0;
}

}  // namespace cli
