#include "child.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>

namespace msda_sweep {

ChildResult run_child(const std::vector<std::string> &words, const std::string &folder,
                      const std::vector<std::pair<std::string, std::string>> &environment,
                      unsigned time_limit_seconds, unsigned long long memory_limit_bytes) {
    const std::string output_path = folder + "/child.out", errors_path = folder + "/child.err";
    std::vector<std::string> copy = words;
    std::vector<char *> argv;
    for (std::string &word : copy) argv.push_back(word.data());
    argv.push_back(nullptr);
    std::cout << std::flush;
    const pid_t child = fork();
    if (child == 0) {
        for (const auto &[name, value] : environment) setenv(name.c_str(), value.c_str(), 1);
        if (!freopen(output_path.c_str(), "w", stdout) || !freopen(errors_path.c_str(), "w", stderr)) _exit(126);
        if (time_limit_seconds > 0) alarm(time_limit_seconds);  // kept across exec
        if (memory_limit_bytes > 0) {
            const rlimit limit = {memory_limit_bytes, memory_limit_bytes};
            setrlimit(RLIMIT_AS, &limit);
        }
        execvp(argv[0], argv.data());
        _exit(127);
    }
    int status = 0;
    waitpid(child, &status, 0);
    ChildResult result;
    result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    auto slurp = [](const std::string &path) {
        std::ifstream in(path);
        return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    };
    result.output = slurp(output_path);
    result.errors = slurp(errors_path);
    if (result.errors.size() > 400) result.errors = result.errors.substr(result.errors.size() - 400);
    return result;
}

}  // namespace msda_sweep
