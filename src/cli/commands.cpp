#include "commands.hpp"

namespace cli {

int cmd_version(const Args &args);
int cmd_generate(const Args &args);
int cmd_inspect(const Args &args);
int cmd_trace(const Args &args);
int cmd_bench(const Args &args);
int cmd_demo(const Args &args);
int cmd_logits(const Args &args);
int cmd_perplexity(const Args &args);
int cmd_run(const Args &args);
int cmd_pack(const Args &args);
int cmd_tokenize(const Args &args);

const std::vector<Command> &commands() {
    static const std::vector<Command> list = {
        {"version", "print the library version", cmd_version},
        {"inspect", "show a model's architecture, sizes and the I/O mode a budget would pick", cmd_inspect},
        {"pack", "write or verify the packed expert file beside a model", cmd_pack},
        {"generate", "write a random-weight model of a real architecture's shape", cmd_generate},
        {"demo", "generate a model larger than the budget and stream it (direct vs mmap)", cmd_demo},
        {"bench", "measure decode/prefill speed, bytes read, hit rate and peak RSS (--sweep, --disk)", cmd_bench},
        {"trace", "synthesise, inspect, replay and record expert routing traces", cmd_trace},
        {"logits", "write the logits of a token sequence (raw float32)", cmd_logits},
        {"perplexity", "perplexity of a text file (-f) or a token id file (--tokens)", cmd_perplexity},
        {"run", "generation from a prompt (-p, -f) or token ids: greedy, or sampled (--temp, --seed, ...)", cmd_run},
        {"tokenize", "print the token ids of a text", cmd_tokenize},
    };
    return list;
}

}  // namespace cli
