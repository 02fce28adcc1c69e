#include "support/generated_models.hpp"

#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <map>

#include "support/paths.hpp"

namespace moe::test {

std::string generated_model(const std::string &dir_name, const std::string &arch, const std::string &shape_args,
                            const std::string &extra) {
    static std::map<std::string, std::string> cache;
    const std::string key = dir_name + "/" + arch + extra;
    if (auto it = cache.find(key); it != cache.end()) return it->second;
    const std::string dir = binary_dir() + "/test-scratch/" + dir_name;
    std::filesystem::create_directories(dir);
    std::string file = arch + extra;
    for (char &c : file)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    const std::string path = dir + "/" + file + ".gguf";
    if (!std::filesystem::exists(path)) {
        const std::string tmp = path + ".tmp." + std::to_string(::getpid());
        const std::string cmd = "cd '" + source_dir() + "/tests' && '" + python() + "' -m tools.make_model --arch " +
                                arch + " --out '" + tmp + "' " + shape_args + " " + extra + " > /dev/null";
        if (run(cmd) != 0) {
            std::filesystem::remove(tmp);
            return cache[key] = "";
        }
        std::filesystem::rename(tmp, path);
    }
    return cache[key] = path;
}

ContextParams context_params(const std::string &path, bool exact, int32_t n_ctx) {
    ContextParams p;
    p.model_path = path;
    p.n_threads = 2;
    p.n_ctx = n_ctx;
    p.exact = exact;
    return p;
}

std::vector<float> step(Context &c, const std::vector<int32_t> &tokens) {
    std::vector<float> logits(size_t(c.n_vocab()));
    c.step(tokens.data(), int32_t(tokens.size()), logits.data());
    return logits;
}

}  // namespace moe::test
