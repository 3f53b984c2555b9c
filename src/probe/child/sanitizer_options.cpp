// In a sanitizer build of the suite (scripts/dev sanitize), the probe must still die by the
// signal an image's library raised: that signal is the outcome the host reports (run.cpp).
// AddressSanitizer's own handlers would turn it into a report and exit 1.
extern "C" const char* __asan_default_options() {  // NOLINT(bugprone-reserved-identifier)
  return "handle_segv=0:handle_sigbus=0:handle_sigfpe=0";
}
