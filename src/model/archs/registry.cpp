// Every supported architecture, by general.architecture name. Adding one is a
// new file in this directory plus one line here.
#include "model/architecture.hpp"

namespace moe {

const Architecture &qwen3moe_architecture();
const Architecture &llama_moe_architecture();
const Architecture &olmoe_architecture();
const Architecture &qwen2moe_architecture();
const Architecture &gpt_oss_architecture();
const Architecture &deepseek2_architecture();

namespace {
const Architecture *const kArchitectures[] = {
    &qwen3moe_architecture(),
    &llama_moe_architecture(),
    &olmoe_architecture(),
    &qwen2moe_architecture(),
    &gpt_oss_architecture(),
    &deepseek2_architecture(),
};
}  // namespace

const Architecture *find_architecture(const std::string &name) {
    for (const Architecture *a : kArchitectures)
        if (name == a->name()) return a;
    return nullptr;
}

std::vector<const char *> architecture_names() {
    std::vector<const char *> names;
    for (const Architecture *a : kArchitectures) names.push_back(a->name());
    return names;
}

}  // namespace moe
