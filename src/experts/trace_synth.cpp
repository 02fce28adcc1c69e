#include "experts/trace_synth.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <numeric>

#include "common/error.hpp"
#include "common/regular_file.hpp"
#include "common/splitmix64.hpp"

namespace moe {
namespace {

struct Rng {  // xoshiro-style quality is not needed; splitmix64 is fast and reproducible
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
    uint64_t next() { return splitmix64(s); }
    double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
};

// Minimal reader for the heat file: finds `"key":` and parses the JSON value
// after it as numbers / nested arrays of numbers.
class HeatJson {
public:
    HeatJson(std::string text, std::string path) : s_(std::move(text)), path_(std::move(path)) {}

    bool find_key(const char *key) {
        const std::string quoted = std::string("\"") + key + "\"";
        size_t at = s_.find(quoted);
        if (at == std::string::npos) return false;
        pos_ = at + quoted.size();
        skip();
        expect(':');
        return true;
    }
    // A finite number (strtod also takes inf, nan and overflows to inf; JSON has none of them).
    double number() {
        skip();
        const char *start = s_.c_str() + pos_;
        char *end = nullptr;
        double v = std::strtod(start, &end);
        if (end == start) fail(Status::bad_format, "%s: number expected at byte %zu", path_.c_str(), pos_);
        if (!std::isfinite(v))
            fail(Status::bad_format, "%s: number at byte %zu is not finite", path_.c_str(), pos_);
        pos_ += static_cast<size_t>(end - start);
        return v;
    }
    // A whole number in [0, UINT32_MAX].
    uint32_t count(const char *key) {
        const double v = number();
        if (v < 0 || v > double(UINT32_MAX) || v != std::floor(v))
            fail(Status::bad_format, "%s: \"%s\" is %.15g (must be a whole number of experts below 2^32)", path_.c_str(),
                 key, v);
        return static_cast<uint32_t>(v);
    }
    std::vector<std::vector<double>> matrix() {
        std::vector<std::vector<double>> rows;
        expect('[');
        skip();
        if (peek() == ']') return ++pos_, rows;
        for (;;) {
            rows.push_back(vector());
            skip();
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            expect(']');
            return rows;
        }
    }

private:
    std::vector<double> vector() {
        std::vector<double> v;
        expect('[');
        skip();
        if (peek() == ']') return ++pos_, v;
        for (;;) {
            v.push_back(number());
            skip();
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            expect(']');
            return v;
        }
    }
    char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
    void skip() {
        while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    void expect(char c) {
        skip();
        if (peek() != c) fail(Status::bad_format, "%s: '%c' expected at byte %zu", path_.c_str(), c, pos_);
        ++pos_;
    }
    std::string s_;
    std::string path_;
    size_t pos_ = 0;
};

// Target inclusion probabilities pi_i = k * p_i, capped at a feasible maximum
// with the excess spread over the others (water filling).
std::vector<double> inclusion_targets(std::vector<double> p, uint32_t k, double cap) {
    const double sum = std::accumulate(p.begin(), p.end(), 0.0);
    for (double &x : p) x = sum > 0 ? x / sum * k : double(k) / double(p.size());
    for (int iter = 0; iter < 64; ++iter) {
        double excess = 0, free_mass = 0;
        for (double &x : p)
            if (x > cap) excess += x - cap, x = cap;
        if (excess <= 1e-12) break;
        for (double x : p)
            if (x < cap) free_mass += x;
        if (free_mass <= 0) break;
        for (double &x : p)
            if (x < cap) x += excess * x / free_mass;
    }
    return p;
}

// One layer's token-by-token process; see synthesize_trace.
class LayerProcess {
public:
    LayerProcess(uint32_t n_expert, uint32_t k, double reuse, uint32_t window, double recall, std::vector<double> weights)
        : n_(n_expert), k_(k), reuse_(reuse), window_(window), recall_(recall), w_(std::move(weights)),
          in_prev_(n_expert, 0), in_window_(n_expert, 0) {}

    void reset() {
        prev_.clear();
        std::fill(in_prev_.begin(), in_prev_.end(), 0);
        std::fill(in_window_.begin(), in_window_.end(), 0);
        history_.clear();
    }
    const std::vector<uint16_t> &step(Rng &rng) {
        cur_.clear();
        for (uint16_t e : prev_)
            if (rng.uniform() < reuse_) cur_.push_back(e);
        // Fresh draws without replacement, excluding the whole previous set.
        avail_.clear();
        double total = 0;
        for (uint32_t e = 0; e < n_; ++e)
            if (!in_prev_[e] && w_[e] > 0) avail_.push_back(static_cast<uint16_t>(e)), total += w_[e];
        while (cur_.size() < k_ && !avail_.empty()) {
            double window_total = 0;
            // Only a windowed process draws this number, so order-1 traces keep their bytes.
            if (window_ > 0 && rng.uniform() < recall_)
                for (uint16_t e : avail_)
                    if (in_window_[e]) window_total += w_[e];
            const size_t i = window_total > 0 ? pick(rng.uniform() * window_total, true) : pick(rng.uniform() * total, false);
            cur_.push_back(avail_[i]);
            total -= w_[avail_[i]];
            avail_[i] = avail_.back();
            avail_.pop_back();
        }
        // Not enough weighted experts left (tiny layers): fill with any unused expert.
        for (uint32_t e = 0; cur_.size() < k_ && e < n_; ++e)
            if (std::find(cur_.begin(), cur_.end(), e) == cur_.end()) cur_.push_back(static_cast<uint16_t>(e));
        for (uint16_t e : prev_) in_prev_[e] = 0;
        prev_ = cur_;
        for (uint16_t e : prev_) in_prev_[e] = 1;
        remember(cur_);
        return cur_;
    }
    std::vector<double> &weights() { return w_; }

private:
    // The available expert where the running weight sum passes u (the last
    // candidate when rounding leaves u unspent); window_only skips experts
    // outside the window.
    size_t pick(double u, bool window_only) const {
        size_t chosen = avail_.size() - 1;
        for (size_t i = 0; i < avail_.size(); ++i) {
            if (window_only && !in_window_[avail_[i]]) continue;
            chosen = i;
            u -= w_[avail_[i]];
            if (u < 0) break;
        }
        return chosen;
    }
    // The window: the sets of the last `window_` tokens and how many of them hold each expert.
    void remember(const std::vector<uint16_t> &set) {
        if (window_ == 0) return;
        history_.push_back(set);
        for (uint16_t e : set) ++in_window_[e];
        if (history_.size() > window_) {
            for (uint16_t e : history_.front()) --in_window_[e];
            history_.pop_front();
        }
    }

    uint32_t n_, k_;
    double reuse_;
    uint32_t window_;
    double recall_;
    std::vector<double> w_;
    std::vector<uint16_t> prev_, cur_, avail_;
    std::vector<uint8_t> in_prev_;
    std::vector<uint32_t> in_window_;
    std::deque<std::vector<uint16_t>> history_;
};

}  // namespace

void load_heat_file(const std::string &path, SynthConfig &config) {
    const FilePtr f = open_regular_file_or_fail(path, "heat file");
    std::string text;
    char buf[1 << 16];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f.get())) > 0;) text.append(buf, n);
    HeatJson json(std::move(text), path);
    if (!json.find_key("heat")) fail(Status::bad_format, "%s: no \"heat\" array", path.c_str());
    config.heat = json.matrix();
    if (config.heat.empty() || config.heat[0].empty()) fail(Status::bad_format, "%s: empty heat", path.c_str());
    for (const auto &row : config.heat) {
        if (row.size() != config.heat[0].size())
            fail(Status::bad_format, "%s: heat rows differ in length", path.c_str());
        for (double x : row)
            if (!(x >= 0)) fail(Status::bad_format, "%s: negative or invalid heat count", path.c_str());
    }
    config.n_layer = static_cast<uint32_t>(config.heat.size());
    config.n_expert = static_cast<uint32_t>(config.heat[0].size());
    if (json.find_key("k")) config.n_expert_used = json.count("k");
}

std::vector<double> feasible_inclusion(const std::vector<double> &popularity, uint32_t k, double reuse) {
    // With reuse r an expert in the set stays with probability r and cannot be
    // redrawn when dropped, so its inclusion cannot exceed 1 / (2 - r).
    return inclusion_targets(popularity, k, 0.98 / (2.0 - reuse));
}

double top20_share(std::vector<double> p) {
    std::sort(p.begin(), p.end(), std::greater<>());
    const size_t top = std::max<size_t>(1, (p.size() + 2) / 5);
    const double total = std::accumulate(p.begin(), p.end(), 0.0);
    return total > 0 ? std::accumulate(p.begin(), p.begin() + long(top), 0.0) / total : 0.0;
}

RoutingTrace synthesize_trace(const SynthConfig &c) {
    if (!valid_trace_header({c.n_layer, c.n_expert, c.n_expert_used, c.bytes_per_expert}))
        fail(Status::invalid_argument,
             "trace synth: bad shape (%u layers, %u experts, top-%u, %llu bytes per expert; allowed: %s)", c.n_layer,
             c.n_expert, c.n_expert_used, static_cast<unsigned long long>(c.bytes_per_expert),
             trace_header_limits().c_str());
    if (!(c.reuse >= 0 && c.reuse <= 1)) fail(Status::invalid_argument, "trace synth: reuse %g not in [0, 1]", c.reuse);
    if (!(c.recall >= 0 && c.recall <= 1))
        fail(Status::invalid_argument, "trace synth: recall %g not in [0, 1]", c.recall);
    if (c.window > 65536) fail(Status::invalid_argument, "trace synth: window %u above 65536 tokens", c.window);
    // A recall with no window would be ignored: refuse it rather than write an order-1 trace the caller did not ask for.
    if (c.window == 0 && c.recall > 0) fail(Status::invalid_argument, "trace synth: recall %g needs a window", c.recall);
    if (!(c.skew >= 0 && c.skew <= 8)) fail(Status::invalid_argument, "trace synth: skew %g not in [0, 8]", c.skew);
    if (!c.heat.empty() && (c.heat.size() != c.n_layer || c.heat[0].size() != c.n_expert))
        fail(Status::invalid_argument, "trace synth: heat shape does not match %u x %u", c.n_layer, c.n_expert);
    const uint32_t k = c.n_expert_used;
    Rng rng(c.seed);

    // Popularity per layer: the heat counts, or Zipf over a random order of experts.
    std::vector<std::vector<double>> popularity(c.n_layer);
    for (uint32_t l = 0; l < c.n_layer; ++l) {
        if (!c.heat.empty()) {
            popularity[l] = c.heat[l];
            continue;
        }
        std::vector<uint32_t> order(c.n_expert);
        std::iota(order.begin(), order.end(), 0u);
        for (uint32_t i = c.n_expert - 1; i > 0; --i) std::swap(order[i], order[rng.next() % (i + 1)]);
        popularity[l].resize(c.n_expert);
        for (uint32_t r = 0; r < c.n_expert; ++r) popularity[l][order[r]] = 1.0 / std::pow(double(r + 1), c.skew);
    }

    std::vector<LayerProcess> layers;
    for (uint32_t l = 0; l < c.n_layer; ++l) {
        std::vector<double> target = feasible_inclusion(popularity[l], k, c.reuse);
        LayerProcess proc(c.n_expert, k, c.reuse, c.window, c.recall, target);
        // Calibrate draw weights on pilot runs: multiplicative updates toward the target inclusion.
        const uint32_t pilot = std::max<uint32_t>(2000, 40 * c.n_expert / k);
        std::vector<double> seen(c.n_expert);
        Rng pilot_rng(c.seed ^ (0xA5A5A5A5ull + l));
        for (int round = 0; round < 8; ++round) {
            std::fill(seen.begin(), seen.end(), 0.0);
            proc.reset();
            for (uint32_t t = 0; t < 50; ++t) proc.step(pilot_rng);  // reach the stationary regime
            for (uint32_t t = 0; t < pilot; ++t)
                for (uint16_t e : proc.step(pilot_rng)) seen[e] += 1.0;
            auto &w = proc.weights();
            for (uint32_t e = 0; e < c.n_expert; ++e) {
                if (target[e] <= 0) {
                    w[e] = 0;
                    continue;
                }
                const double measured = (seen[e] + 0.5) / (pilot + 0.5 / target[e]);
                w[e] *= std::clamp(std::pow(target[e] / measured, 0.8), 0.25, 4.0);
            }
        }
        proc.reset();
        layers.push_back(std::move(proc));
    }

    RoutingTrace trace = RoutingTrace::dense({c.n_layer, c.n_expert, k, c.bytes_per_expert}, c.n_tokens);
    for (uint64_t t = 0; t < c.n_tokens; ++t)
        for (uint32_t l = 0; l < c.n_layer; ++l) {
            const std::vector<uint16_t> &set = layers[l].step(rng);
            std::copy(set.begin(), set.end(), trace.experts(t, l).begin());
        }
    return trace;
}

}  // namespace moe
