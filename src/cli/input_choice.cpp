#include "input_choice.hpp"

namespace cli {

std::string repeated_input_error(const std::string &first, const std::string &second, bool same_option,
                                 const char *what) {
    if (!same_option) return first + " and " + second + " both give the " + what + ": give one";
    const std::string spelled = first == second ? "" : " (first as " + first + ")";
    return second + " is given twice" + spelled + ": give the " + what + " once";
}

}  // namespace cli
