// What a sweep measured: every candidate (the CSV, appended as it goes, so
// an interrupted sweep resumes from it), the table, the plot and the
// winners' rows of schedules/tuned.cmake.
#pragma once

#include <deque>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "space.h"

namespace msda_sweep {

// A candidate's time on one shape: the median of the per-round ratios
// candidate / shipped, and the median times in milliseconds.
struct ShapeResult {
    double ratio = 0, candidate_ms = 0, shipped_ms = 0;
};

struct Candidate {
    std::string kernel;
    int id = 0;
    std::string source;         // shipped, random, mutation, confirmation, autoscheduler
    std::string autoscheduler;  // its name, for an autoscheduler's
    msda::schedules::Knobs knobs;
    std::string knobs_text;  // describe_knobs: the knobs that differ from the family defaults
    std::string check;       // ok, wrong: ..., failed: ...
    double compile_seconds = 0, seconds = 0;
    double score = 0;  // the geometric mean of the shapes' ratios (timed and ok)
    std::map<std::string, ShapeResult> shapes;
};

class Report {
public:
    void configure(const std::vector<std::string> &shapes, const std::string &klass);
    // Reads a previous run's CSV (--resume); returns the seconds it spent.
    double read_csv(const std::string &path);
    // Appends each candidate to the CSV from now on (a header if new).
    void open_csv(const std::string &path);

    const Candidate &add(const Candidate &candidate);
    // A candidate as one CSV row, and back (nothing for a row cut short).
    std::string row(const Candidate &candidate) const;
    bool parse(const std::string &line, Candidate &candidate) const;
    const std::deque<Candidate> &candidates_of(const std::string &kernel);
    int next_id(const std::string &kernel);
    int searched(const std::string &kernel);  // random and mutated candidates
    bool has_autoscheduler(const std::string &kernel, const std::string &name);
    std::size_t size() const;

    // The kernel's winner (null: the shipped configuration stays).
    void set_winner(const std::string &kernel, const Candidate *winner, const std::string &shipped_settings);
    const Candidate *winner(const std::string &kernel) const;
    // The winners a CSV records (--report-only): each kernel's last
    // confirmation, where it beat the shipped configuration by 1%.
    void infer_winners();
    void add_count(const std::string &kernel, int id, const std::string &shape, double instructions_per_sample);

    void write_table(const std::string &path, const std::string &mode_note) const;
    void write_plot(const std::string &path) const;
    // Replaces the rows of this class and the swept kernels that have a
    // winner.
    void merge_winners(std::vector<TunedRow> &rows) const;

private:
    std::vector<std::string> shapes_;
    std::string klass_;
    std::map<std::string, std::deque<Candidate>> candidates_;
    std::map<std::string, std::pair<const Candidate *, std::string>> winners_;
    struct Count {
        std::string kernel, shape;
        int id;
        double per_sample;
    };
    std::vector<Count> counts_;
    std::ofstream csv_;
};

}  // namespace msda_sweep
