#include "report.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <iomanip>
#include <set>
#include <sstream>
#include <stdexcept>

namespace msda_sweep {

namespace {

std::string quoted(const std::string &field) {
    if (field.find_first_of(",\"\n") == std::string::npos) return field;
    std::string text = "\"";
    for (char c : field) text += c == '"' ? std::string("\"\"") : std::string(1, c);
    return text + "\"";
}

std::vector<std::string> split_csv(const std::string &line) {
    std::vector<std::string> fields(1);
    bool in_quotes = false;
    for (std::size_t i = 0; i < line.size(); i++) {
        const char c = line[i];
        if (in_quotes && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
            fields.back() += '"';
            i++;
        } else if (c == '"') {
            in_quotes = !in_quotes;
        } else if (c == ',' && !in_quotes) {
            fields.emplace_back();
        } else {
            fields.back() += c;
        }
    }
    return fields;
}

std::string number(double value, int digits = 3) {
    std::ostringstream text;
    text << std::fixed << std::setprecision(digits) << value;
    return text.str();
}

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    }
    return "this CPU";
}

}  // namespace

void Report::configure(const std::vector<std::string> &shapes, const std::string &klass) {
    shapes_ = shapes;
    klass_ = klass;
}

namespace {
std::string header_of(const std::vector<std::string> &shapes) {
    std::string header = "kernel,id,source,autoscheduler,knobs,check,compile_s,seconds,score";
    for (const std::string &shape : shapes) header += "," + shape + "_ratio," + shape + "_ms," + shape + "_shipped_ms";
    return header;
}
}  // namespace

double Report::read_csv(const std::string &path) {
    std::ifstream in(path);
    if (!in) throw std::invalid_argument("msda sweep: --resume: cannot read " + path);
    std::string line;
    std::getline(in, line);
    if (line != header_of(shapes_)) {
        throw std::invalid_argument("msda sweep: --resume: " + path + " was written for other shapes (" + line + ")");
    }
    double seconds = 0;
    while (std::getline(in, line)) {
        Candidate c;
        if (!parse(line, c)) continue;  // a row cut short by an interruption
        seconds += c.seconds;
        candidates_[c.kernel].push_back(c);
    }
    return seconds;
}

bool Report::parse(const std::string &line, Candidate &c) const {
    const std::vector<std::string> f = split_csv(line);
    if (f.size() != 9 + 3 * shapes_.size()) return false;
    c.kernel = f[0];
    c.id = std::stoi(f[1]);
    c.source = f[2];
    c.autoscheduler = f[3];
    c.knobs_text = f[4];
    c.knobs = knobs_from_settings(f[4]);
    c.check = f[5];
    c.compile_seconds = std::stod(f[6]);
    c.seconds = std::stod(f[7]);
    c.score = std::stod(f[8]);
    for (std::size_t s = 0; s < shapes_.size(); s++) {
        if (f[9 + 3 * s].empty()) continue;
        c.shapes[shapes_[s]] = {std::stod(f[9 + 3 * s]), std::stod(f[10 + 3 * s]), std::stod(f[11 + 3 * s])};
    }
    return true;
}

void Report::open_csv(const std::string &path) {
    const bool fresh = !std::ifstream(path).good();
    csv_.open(path, std::ios::app);
    if (!csv_) throw std::runtime_error("msda sweep: cannot write " + path);
    if (fresh) csv_ << header_of(shapes_) << "\n" << std::flush;
}

std::string Report::row(const Candidate &c) const {
    std::ostringstream csv;
    csv << c.kernel << "," << c.id << "," << c.source << "," << c.autoscheduler << "," << quoted(c.knobs_text) << ","
        << quoted(c.check) << "," << number(c.compile_seconds) << "," << number(c.seconds) << ","
        << number(c.score, 4);
    for (const std::string &shape : shapes_) {
        const auto found = c.shapes.find(shape);
        if (found == c.shapes.end()) {
            csv << ",,,";
        } else {
            csv << "," << number(found->second.ratio, 4) << "," << number(found->second.candidate_ms) << ","
                << number(found->second.shipped_ms);
        }
    }
    return csv.str();
}

const Candidate &Report::add(const Candidate &c) {
    candidates_[c.kernel].push_back(c);
    if (csv_.is_open()) csv_ << row(c) << "\n" << std::flush;
    return candidates_[c.kernel].back();
}

const std::deque<Candidate> &Report::candidates_of(const std::string &kernel) { return candidates_[kernel]; }

int Report::next_id(const std::string &kernel) {
    int id = 0;
    for (const Candidate &c : candidates_[kernel]) id = std::max(id, c.id);
    return id + 1;
}

int Report::searched(const std::string &kernel) {
    int n = 0;
    for (const Candidate &c : candidates_[kernel]) n += c.source == "random" || c.source == "mutation";
    return n;
}

bool Report::has_autoscheduler(const std::string &kernel, const std::string &name) {
    for (const Candidate &c : candidates_[kernel]) {
        if (c.autoscheduler == name) return true;
    }
    return false;
}

std::size_t Report::size() const {
    std::size_t n = 0;
    for (const auto &[kernel, list] : candidates_) n += list.size();
    return n;
}

void Report::set_winner(const std::string &kernel, const Candidate *winner, const std::string &shipped_settings) {
    winners_[kernel] = {winner, shipped_settings};
}

const Candidate *Report::winner(const std::string &kernel) const {
    const auto found = winners_.find(kernel);
    return found == winners_.end() ? nullptr : found->second.first;
}

void Report::add_count(const std::string &kernel, int id, const std::string &shape, double per_sample) {
    counts_.push_back({kernel, shape, id, per_sample});
}

void Report::write_table(const std::string &path, const std::string &mode_note) const {
    std::ofstream out(path);
    out << "Class " << klass_ << " on " << cpu_model() << "; " << mode_note
        << ". Each cell: the candidate's time over the shipped configuration's (median of alternating rounds; "
           "below 1 is faster), and its time.\n\n";
    out << "| kernel | candidate | knobs |";
    for (const std::string &shape : shapes_) out << " " << shape << " |";
    out << "\n|---|---|---|";
    for (std::size_t s = 0; s < shapes_.size(); s++) out << "--:|";
    out << "\n";
    for (const auto &[kernel, list] : candidates_) {
        std::vector<std::pair<std::string, const Candidate *>> rows;
        const Candidate *best = nullptr;
        for (const Candidate &c : list) {
            if (c.source == "shipped") rows.emplace_back("shipped", &c);
            if (!c.autoscheduler.empty()) rows.emplace_back(c.autoscheduler + " (autoscheduler)", &c);
            if (c.check == "ok" && c.autoscheduler.empty() && c.source != "shipped" &&
                (!best || c.score < best->score)) {
                best = &c;
            }
        }
        const Candidate *chosen = winner(kernel);
        if (chosen) {
            rows.emplace_back("winner", chosen);
        } else if (best) {
            rows.emplace_back("best searched (not shipped: under 1% faster, or unconfirmed)", best);
        }
        for (const auto &[label, c] : rows) {
            out << "| " << kernel << " | " << label << " #" << c->id << " | "
                << (c->autoscheduler.empty() ? (c->knobs_text.empty() ? "family defaults" : c->knobs_text) : "-")
                << " |";
            for (const std::string &shape : shapes_) {
                const auto found = c->shapes.find(shape);
                if (c->check != "ok") {
                    // The reason once, in the first shape's cell.
                    out << " " << (shape == shapes_.front() ? c->check.substr(0, 110) : "(as " + shapes_.front() + ")")
                        << " |";
                } else if (found == c->shapes.end()) {
                    out << " compiled |";
                } else {
                    out << " " << number(found->second.ratio, 2) << "x (" << number(found->second.candidate_ms, 1)
                        << " ms) |";
                }
            }
            out << "\n";
        }
    }
    if (!counts_.empty()) {
        out << "\nInstructions a sample (callgrind, one thread):\n\n| kernel | candidate | shape | instructions |\n"
               "|---|---|---|--:|\n";
        for (const Count &count : counts_) {
            out << "| " << count.kernel << " | #" << count.id << " | " << count.shape << " | "
                << number(count.per_sample, 1) << " |\n";
        }
    }
}

void Report::write_plot(const std::string &path) const {
    // A panel per (kernel, knob): each timed candidate's score against the
    // knob's value; the shipped time is the line at 1, the winner red.
    const int panel_w = 170, panel_h = 130, margin = 40;
    std::vector<std::pair<std::string, std::vector<std::string>>> rows;
    for (const auto &[kernel, list] : candidates_) {
        std::set<std::string> knobs;
        for (const Candidate &c : list) {
            if (c.autoscheduler.empty()) {
                for (const msda::schedules::KnobSpec &spec : msda::schedules::knob_specs()) {
                    if (c.knobs.*(spec.field) != msda::schedules::Knobs{}.*(spec.field)) knobs.insert(spec.name);
                }
            }
        }
        rows.emplace_back(kernel, std::vector<std::string>(knobs.begin(), knobs.end()));
    }
    std::size_t columns = 1;
    for (const auto &row : rows) columns = std::max(columns, row.second.size());
    const int width = margin + static_cast<int>(columns) * (panel_w + margin);
    const int height = margin + static_cast<int>(rows.size()) * (panel_h + margin) + 20;
    std::ofstream out(path);
    out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
        << "\" font-family=\"sans-serif\" font-size=\"10\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        << "<text x=\"" << margin << "\" y=\"14\" font-size=\"12\">msda sweep, class " << klass_
        << ": time over the shipped configuration's (log scale, 0.5 to 2; below the line is faster) against each "
           "knob</text>\n";
    auto y_of = [&](double score, int top) {
        const double clamped = std::clamp(score, 0.5, 2.0);
        return top + panel_h * (1.0 - (std::log2(clamped) + 1.0) / 2.0);
    };
    for (std::size_t r = 0; r < rows.size(); r++) {
        const std::string &kernel = rows[r].first;
        const Candidate *chosen = winner(kernel);
        const int top = margin + static_cast<int>(r) * (panel_h + margin);
        for (std::size_t k = 0; k < rows[r].second.size(); k++) {
            const std::string &knob = rows[r].second[k];
            const int left = margin + static_cast<int>(k) * (panel_w + margin);
            const msda::schedules::KnobSpec *spec = msda::schedules::find_knob(knob);
            std::set<int> values;
            for (const Candidate &c : candidates_.at(kernel)) values.insert(c.knobs.*(spec->field));
            std::vector<int> ordered(values.begin(), values.end());
            auto x_of = [&](int value) {
                const std::size_t at = std::find(ordered.begin(), ordered.end(), value) - ordered.begin();
                return left + panel_w * (at + 0.5) / ordered.size();
            };
            out << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << panel_w << "\" height=\"" << panel_h
                << "\" fill=\"none\" stroke=\"#999\"/>\n";
            out << "<text x=\"" << left << "\" y=\"" << top - 4 << "\">" << kernel << ": " << knob << "</text>\n";
            for (const double tick : {0.5, 1.0, 2.0}) {
                out << "<text x=\"" << left - 3 << "\" y=\"" << y_of(tick, top) + 3 << "\" text-anchor=\"end\">"
                    << tick << "x</text>\n";
            }
            out << "<line x1=\"" << left << "\" x2=\"" << left + panel_w << "\" y1=\"" << y_of(1.0, top) << "\" y2=\""
                << y_of(1.0, top) << "\" stroke=\"#555\" stroke-dasharray=\"3,3\"/>\n";
            for (int value : ordered) {
                out << "<text x=\"" << x_of(value) << "\" y=\"" << top + panel_h + 12
                    << "\" text-anchor=\"middle\">" << value << "</text>\n";
            }
            for (const Candidate &c : candidates_.at(kernel)) {
                if (c.check != "ok" || !c.autoscheduler.empty() || c.score <= 0) continue;
                const bool is_winner = chosen && chosen->id == c.id;
                out << "<circle cx=\"" << x_of(c.knobs.*(spec->field)) << "\" cy=\"" << y_of(c.score, top)
                    << "\" r=\"" << (is_winner ? 4 : 2.5) << "\" fill=\"" << (is_winner ? "#d00" : "#36c")
                    << "\" fill-opacity=\"0.6\"/>\n";
            }
        }
    }
    out << "</svg>\n";
}

void Report::infer_winners() {
    for (const auto &[kernel, list] : candidates_) {
        const Candidate *confirmed = nullptr;
        for (const Candidate &c : list) {
            if (c.source == "confirmation") confirmed = &c;
        }
        set_winner(kernel, confirmed && confirmed->check == "ok" && confirmed->score < 0.99 ? confirmed : nullptr, "");
    }
}

void Report::merge_winners(std::vector<TunedRow> &rows) const {
    const std::time_t now = std::time(nullptr);
    char date[16];
    std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
    for (const auto &[kernel, entry] : winners_) {
        const Candidate *chosen = entry.first;
        if (!chosen) continue;
        rows.erase(std::remove_if(rows.begin(), rows.end(),
                                  [&](const TunedRow &row) { return row.klass == klass_ && row.schedule == kernel; }),
                   rows.end());
        if (chosen->knobs_text.empty()) continue;  // the family defaults won
        std::string comment = "# msda sweep " + std::string(date) + " on " + cpu_model() + ":";
        for (const auto &[shape, result] : chosen->shapes) {
            comment += " " + shape + " " + number(1.0 / result.ratio, 2) + "x";
        }
        comment += " the shipped speed (was: " + (entry.second.empty() ? "family defaults" : entry.second) + ")";
        rows.push_back({klass_, kernel, chosen->knobs_text, comment});
    }
    const std::vector<std::string> order = {"forward", "grad_value", "grad_sample", "relayout"};
    std::stable_sort(rows.begin(), rows.end(), [&](const TunedRow &a, const TunedRow &b) {
        if (a.klass != b.klass) return a.klass < b.klass;
        return std::find(order.begin(), order.end(), a.schedule) < std::find(order.begin(), order.end(), b.schedule);
    });
}

}  // namespace msda_sweep
