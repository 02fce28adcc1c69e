// The one input a command reads, which any of several options can give (run's
// prompt: -p, -f or --tokens; tokenize's and perplexity's text): chosen once,
// from the table of options the command names it by, so a command names each
// option once and asks later which one gave the input, never how it was spelled.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.hpp"
#include "model_options.hpp"

namespace cli {

// One option that gives the input: what it gives (the command's own enum)
// and its spellings.
template <typename Source>
struct InputOption {
    Source source;
    const char *name;         // "--file"
    const char *alias;        // "-f", or nullptr
    bool names_file = false;  // its value is a file name: "" is refused as every file option refuses it
};

// The usage error for a second input option, `second` as spelled after
// `first`: "-p is given twice", "--file is given twice (first as -f)" when
// `same_option` (one option by both spellings), else "-p and -f both give
// the prompt". `what` names the input ("prompt", "text").
std::string repeated_input_error(const std::string &first, const std::string &second, bool same_option,
                                 const char *what);

template <typename Source>
class InputChoice {
public:
    InputChoice(const char *what, std::initializer_list<InputOption<Source>> options)
        : what_(what), options_(options) {}

    // Takes args[i] and its value (advancing i) when args[i] is one of the
    // options; false when it is not. Throws std::runtime_error (repeated_input_error)
    // when the input was given already, so that a second source, or the same
    // option again, is refused instead of the last one silently taken.
    bool parse(const Args &args, size_t &i) {
        for (size_t k = 0; k < options_.size(); ++k) {
            const InputOption<Source> &o = options_[k];
            if (args[i] != o.name && (!o.alias || args[i] != o.alias)) continue;
            if (given()) throw std::runtime_error(repeated_input_error(spelled_, args[i], k == chosen_, what_));
            chosen_ = k;
            spelled_ = args[i];
            value_ = option_value(args, i);
            if (o.names_file) file_name_option(value_, spelled_);
            return true;
        }
        return false;
    }

    bool given() const { return chosen_ < options_.size(); }
    // Which option gave the input, and its value; only once given().
    Source source() const { return options_.at(chosen_).source; }
    const std::string &value() const { return value_; }

private:
    const char *what_;
    std::vector<InputOption<Source>> options_;
    size_t chosen_ = size_t(-1);  // index into options_; none yet
    std::string spelled_, value_;
};

}  // namespace cli
