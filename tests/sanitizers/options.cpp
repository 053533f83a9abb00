// The sanitizers' settings for every program a sanitizer tree builds (its
// tests, the CLI, the bench; CMakeLists.txt links this in when MSDA_SANITIZE
// is set), compiled in so that a test run by hand behaves as under ctest.
// Each suppression says why it is there; none covers msda's own code or the
// code it generates.
extern "C" {

// AddressSanitizer: leaks are checked at exit (LeakSanitizer); the first
// finding ends the program (-fno-sanitize-recover as well).
// intercept_tls_get_addr=0: compiler-rt 14's LeakSanitizer crashes at exit
// ("Tracer caught signal 11", a dynamic TLS block at a bogus address) in a
// process that has loaded PoCL through the OpenCL ICD loader, under Debian
// 12's glibc 2.36; not tracking dlopen'ed libraries' TLS avoids it (their
// TLS blocks are then not scanned for pointers: an object only they held
// would be reported as a leak, never hidden).
const char *__asan_default_options() {
    return "detect_leaks=1:halt_on_error=1:strict_string_checks=1:intercept_tls_get_addr=0";
}

// UndefinedBehaviorSanitizer: a report with its stack.
const char *__ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }

// ThreadSanitizer: the first report ends the program.
const char *__tsan_default_options() { return "halt_on_error=1:second_deadlock_stack=1"; }

}  // extern "C"
