// overflow_test.cpp: a coroutine that runs off the bottom of its stack dies
// by SIGSEGV after one line naming it, its stack and the fault address; any
// other fault reaches the handler that was installed before weft's; every
// thread that runs coroutines has an alternate signal stack; and a frame
// larger than the guard page is caught only when compiled with
// -fstack-clash-protection.
//
// The parent process of this binary never runs a coroutine. weft installs
// its handler once per process, when a thread first prepares to run a
// coroutine, and records the handler it replaces. Death-test children are
// forked (the default "fast" style: the "threadsafe" style re-executes the
// binary, which fails under qemu-user without binfmt registration), so they
// inherit whatever the parent did. If the parent had run a coroutine, a
// child could no longer install a handler of its own before weft's. So every
// test here does its work in a child, and the chaining tests check first that
// the parent's SIGSEGV and SIGBUS actions are still the defaults.

#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "death/stack_clash.hpp"
#include "support/leak_check.hpp"
#include "weft/coroutine.hpp"

namespace {

using ::testing::ExitedWithCode;
using ::testing::KilledBySignal;

constexpr std::size_t small_stack = 64 * 1024;

class stack_overflow : public weft::test::leak_checked {};

void say(const char* s) noexcept {
    ssize_t ignored = ::write(STDERR_FILENO, s, std::strlen(s));
    (void)ignored;
}

// require() ends a child with status 1 and a reason when ok is false.
void require(bool ok, const char* what) {
    if (ok) return;
    say("requirement failed: ");
    say(what);
    say("\n");
    std::_Exit(1);
}

// checked_child() runs f in a death-test child, which exits 0 unless a
// require() in f failed (status 1, reason on stderr).
template <class F>
void checked_child(F f) {
    f();
    std::_Exit(0);
}

// no_core_file() keeps a child that is meant to die from leaving a core file
// in the build tree (qemu-user honours the limit too).
void no_core_file() {
    rlimit none{0, 0};
    ::setrlimit(RLIMIT_CORE, &none);
}

// fault_actions_are_defaults() says whether nobody, weft included, has
// installed a SIGSEGV or SIGBUS handler in this process.
bool fault_actions_are_defaults() {
    for (int sig : {SIGSEGV, SIGBUS}) {
        struct sigaction cur{};
        if (::sigaction(sig, nullptr, &cur) != 0) return false;
        if ((cur.sa_flags & SA_SIGINFO) || cur.sa_handler != SIG_DFL) return false;
    }
    return true;
}

constexpr const char* parent_touched_weft =
    "weft's fault handler is already installed in the parent process (some test ran a coroutine outside a "
    "death-test child), so a child cannot install a handler of its own before weft's";

// ---------------------------------------------------------------------------
// Matchers for the child's stderr

// report is what a child printed for one overflow: parsed, not matched as
// text, so the numbers can be checked against each other.
struct report {
    std::string who;
    std::uintptr_t fault = 0, lo = 0, hi = 0;
    std::size_t size = 0, guard = 0, requested = 0;
};

bool parse_report(const std::string& err, report& r) {
    const std::string head = "weft: stack overflow in coroutine ";
    const std::size_t at = err.find(head);
    if (at == std::string::npos) return false;
    const std::size_t who_at = at + head.size();
    const std::size_t colon = err.find(": fault address ", who_at);
    if (colon == std::string::npos) return false;
    r.who = err.substr(who_at, colon - who_at);
    unsigned long long fault, lo, hi, size, guard, requested;
    int used = 0;
    const int n = std::sscanf(err.c_str() + colon,
                              ": fault address %llx, stack [%llx, %llx) (%llu bytes, guard %llu bytes), stack size "
                              "requested %llu bytes\n%n",
                              &fault, &lo, &hi, &size, &guard, &requested, &used);
    if (n != 6 || used == 0) return false;
    r.fault = fault;
    r.lo = lo;
    r.hi = hi;
    r.size = size;
    r.guard = guard;
    r.requested = requested;
    return true;
}

// overflow_report matches stderr that holds weft's overflow line for a
// coroutine described as `who` ("'name'", or "<anonymous" for a prefix
// match) on an mmap_stack of `requested` bytes with a one-page guard, whose
// fault address lies in that guard.
class overflow_report final : public ::testing::MatcherInterface<const std::string&> {
public:
    overflow_report(std::string who, std::size_t requested) : who_(std::move(who)), requested_(requested) {}

    bool MatchAndExplain(const std::string& err, ::testing::MatchResultListener* l) const override {
        report r;
        if (!parse_report(err, r)) {
            *l << "has no complete weft overflow report";
            return false;
        }
        const bool anonymous_ok = who_ == "<anonymous" && r.who.rfind("<anonymous 0x", 0) == 0 && r.who.back() == '>';
        if (r.who != who_ && !anonymous_ok) {
            *l << "names " << r.who;
            return false;
        }
        const std::size_t page = weft::page_size();
        const std::size_t rounded = (requested_ + page - 1) / page * page;
        if (r.requested != requested_ || r.size != rounded || r.hi - r.lo != r.size || r.guard != page) {
            *l << "reports the wrong sizes";
            return false;
        }
        if (!(r.fault < r.lo && r.lo - r.fault <= r.guard)) {
            *l << "reports a fault address outside the guard page";
            return false;
        }
        return true;
    }
    void DescribeTo(std::ostream* os) const override {
        *os << "holds weft's overflow report for coroutine " << who_ << " (" << requested_
            << " bytes requested, one guard page, fault address in it)";
    }

private:
    std::string who_;
    std::size_t requested_;
};

::testing::Matcher<const std::string&> reports_overflow(std::string who, std::size_t requested = small_stack) {
    return ::testing::MakeMatcher(new overflow_report(std::move(who), requested));
}

// text matches stderr that contains `want` (unless empty) and does not
// contain "stack overflow".
class text final : public ::testing::MatcherInterface<const std::string&> {
public:
    explicit text(std::string want) : want_(std::move(want)) {}
    bool MatchAndExplain(const std::string& err, ::testing::MatchResultListener* l) const override {
        if (err.find("stack overflow") != std::string::npos) {
            *l << "reports a stack overflow";
            return false;
        }
        return err.find(want_) != std::string::npos;
    }
    void DescribeTo(std::ostream* os) const override {
        *os << "contains \"" << want_ << "\" and no stack-overflow report";
    }

private:
    std::string want_;
};

::testing::Matcher<const std::string&> no_overflow_report(std::string want = "") {
    return ::testing::MakeMatcher(new text(std::move(want)));
}

// ---------------------------------------------------------------------------
// What the coroutines do

volatile std::size_t g_zero = 0;
volatile std::size_t g_depth_limit = SIZE_MAX;
volatile std::size_t g_sink = 0;
int* volatile g_null = nullptr;

// recurse() uses about 300 bytes of stack per call and never stops. The
// index is opaque and the frame is read after the call, so the compiler
// neither shrinks the array nor turns the recursion into a loop.
[[gnu::noinline]] std::size_t recurse(std::size_t depth) {
    volatile unsigned char frame[256];
    frame[g_zero] = static_cast<unsigned char>(depth);
    const std::size_t below = depth < g_depth_limit ? recurse(depth + 1) : 0;
    return below + frame[g_zero];
}

void run_off_the_stack(weft::yielder<>&) { g_sink = recurse(0); }

// overflow() runs a coroutine that recurses without bound on a 64 KiB
// mmap_stack.
void overflow(const char* name) {
    no_core_file();
    weft::coroutine<> co(std::allocator_arg, weft::mmap_stack{}, &run_off_the_stack,
                         {.stack_size = small_stack, .name = name});
    (void)co.resume();
}

// run_one() runs a trivial coroutine to completion.
void run_one() {
    weft::coroutine<> co([](weft::yielder<>&) { g_sink = g_sink + 1; });
    (void)co.resume();
}

// fault_in_coroutine() runs a coroutine that writes through a null pointer.
void fault_in_coroutine() {
    no_core_file();
    weft::coroutine<> co([](weft::yielder<>&) { *g_null = 1; }, {.name = "null"});
    (void)co.resume();
}

void install(int sig, void (*fn)(int, siginfo_t*, void*)) {
    struct sigaction sa{};
    sa.sa_sigaction = fn;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO;
    require(::sigaction(sig, &sa, nullptr) == 0, "sigaction");
}

// ---------------------------------------------------------------------------
// Overflow reports

TEST_F(stack_overflow, unbounded_recursion_names_the_coroutine_and_its_stack) {
    EXPECT_EXIT(overflow("deep"), KilledBySignal(SIGSEGV), reports_overflow("'deep'"));
    // The line as users see it.
    EXPECT_EXIT(overflow("deep"), KilledBySignal(SIGSEGV),
                "weft: stack overflow in coroutine 'deep': fault address 0x[0-9a-f]+, stack \\[0x[0-9a-f]+, "
                "0x[0-9a-f]+\\) \\(65536 bytes, guard [0-9]+ bytes\\), stack size requested 65536 bytes");
}

TEST_F(stack_overflow, an_anonymous_coroutine_is_named_by_address) {
    EXPECT_EXIT(overflow(""), KilledBySignal(SIGSEGV), reports_overflow("<anonymous"));
}

TEST_F(stack_overflow, the_requested_size_is_reported_beside_the_rounded_one) {
    auto statement = [] {
        no_core_file();
        // An mmap_stack of its own: the default pooled stack would be the
        // pool's 128 KiB whatever the request.
        weft::coroutine<> co(std::allocator_arg, weft::mmap_stack{}, &run_off_the_stack, {.stack_size = 50000, .name = "odd"});
        (void)co.resume();
    };
    EXPECT_EXIT(statement(), KilledBySignal(SIGSEGV), reports_overflow("'odd'", 50000));
}

TEST_F(stack_overflow, a_coroutine_resumed_by_another_is_the_one_named) {
    auto statement = [] {
        no_core_file();
        weft::coroutine<> outer(
            [](weft::yielder<>&) {
                weft::coroutine<> inner(std::allocator_arg, weft::mmap_stack{}, &run_off_the_stack,
                                        {.stack_size = small_stack, .name = "inner"});
                (void)inner.resume();
            },
            {.name = "outer"});
        (void)outer.resume();
    };
    EXPECT_EXIT(statement(), KilledBySignal(SIGSEGV), reports_overflow("'inner'"));
}

TEST_F(stack_overflow, is_reported_on_a_thread_other_than_main) {
    auto statement = [] {
        std::thread t([] { overflow("threaded"); });
        t.join();
    };
    EXPECT_EXIT(statement(), KilledBySignal(SIGSEGV), reports_overflow("'threaded'"));
}

TEST_F(stack_overflow, is_reported_on_a_thread_with_its_own_alternate_stack) {
    auto statement = [] {
        std::thread t([] {
            static std::vector<unsigned char> own(64 * 1024);
            stack_t ss{};
            ss.ss_sp = own.data();
            ss.ss_size = own.size();
            require(::sigaltstack(&ss, nullptr) == 0, "sigaltstack");
            overflow("own altstack");
        });
        t.join();
    };
    EXPECT_EXIT(statement(), KilledBySignal(SIGSEGV), reports_overflow("'own altstack'"));
}

TEST_F(stack_overflow, is_reported_even_when_a_user_handler_was_installed_first) {
    // weft reports the overflow and dies with the default action; the
    // earlier handler is for faults weft does not diagnose.
    ASSERT_TRUE(fault_actions_are_defaults()) << parent_touched_weft;
    auto statement = [] {
        install(SIGSEGV, [](int, siginfo_t*, void*) {
            say("user handler ran\n");
            std::_Exit(42);
        });
        overflow("deep");
    };
    EXPECT_EXIT(statement(), KilledBySignal(SIGSEGV), reports_overflow("'deep'"));
}

// ---------------------------------------------------------------------------
// Other faults are not overflows

TEST_F(stack_overflow, a_null_write_in_a_coroutine_dies_by_sigsegv_without_a_report) {
    EXPECT_EXIT(fault_in_coroutine(), KilledBySignal(SIGSEGV), no_overflow_report());
}

TEST_F(stack_overflow, a_sent_sigsegv_still_kills_without_a_report) {
    // si_code says the signal was sent, not raised by a fault: returning
    // from the handler would not repeat it, so weft must re-send it.
    auto statement = [] {
        no_core_file();
        weft::coroutine<> co([](weft::yielder<>&) { ::raise(SIGSEGV); }, {.name = "sender"});
        (void)co.resume();
        say("survived\n");
    };
    EXPECT_EXIT(statement(), KilledBySignal(SIGSEGV), no_overflow_report());
}

TEST_F(stack_overflow, a_write_to_another_coroutines_guard_is_not_its_overflow) {
    auto statement = [] {
        no_core_file();
        weft::coroutine<> co([](weft::yielder<>& y) { y.yield(); }, {.name = "bystander"});
        (void)co.resume();
        auto* below = static_cast<volatile char*>(co.ref().stack().base) - 1;
        *below = 1;  // from the main stack, into the suspended coroutine's guard
    };
    EXPECT_EXIT(statement(), KilledBySignal(SIGSEGV), no_overflow_report());
}

// ---------------------------------------------------------------------------
// Chaining to the handler installed before weft's

TEST_F(stack_overflow, other_faults_reach_an_earlier_siginfo_handler_unchanged) {
    ASSERT_TRUE(fault_actions_are_defaults()) << parent_touched_weft;
    auto statement = [] {
        install(SIGSEGV, [](int sig, siginfo_t* info, void*) {
            if (sig == SIGSEGV && info->si_code == SEGV_MAPERR && info->si_addr == nullptr)
                say("user handler: SIGSEGV, SEGV_MAPERR at address 0\n");
            else
                say("user handler: unexpected signal information\n");
            std::_Exit(42);
        });
        fault_in_coroutine();
    };
    EXPECT_EXIT(statement(), ExitedWithCode(42), no_overflow_report("user handler: SIGSEGV, SEGV_MAPERR at address 0"));
}

TEST_F(stack_overflow, other_faults_reach_an_earlier_plain_handler) {
    ASSERT_TRUE(fault_actions_are_defaults()) << parent_touched_weft;
    auto statement = [] {
        struct sigaction sa{};
        sa.sa_handler = [](int sig) {
            say(sig == SIGSEGV ? "plain handler: SIGSEGV\n" : "plain handler: wrong signal\n");
            std::_Exit(43);
        };
        sigemptyset(&sa.sa_mask);
        require(::sigaction(SIGSEGV, &sa, nullptr) == 0, "sigaction");
        fault_in_coroutine();
    };
    EXPECT_EXIT(statement(), ExitedWithCode(43), no_overflow_report("plain handler: SIGSEGV"));
}

TEST_F(stack_overflow, sigbus_reaches_an_earlier_handler) {
    ASSERT_TRUE(fault_actions_are_defaults()) << parent_touched_weft;
    auto statement = [] {
        install(SIGBUS, [](int sig, siginfo_t* info, void*) {
            say(sig == SIGBUS && info->si_code == BUS_ADRERR ? "bus handler: SIGBUS, BUS_ADRERR\n"
                                                              : "bus handler: unexpected signal information\n");
            std::_Exit(44);
        });
        // A page of a mapping beyond the end of its (empty) file.
        const int fd = ::memfd_create("weft-sigbus", 0);
        require(fd >= 0, "memfd_create");
        void* p = ::mmap(nullptr, weft::page_size(), PROT_READ, MAP_SHARED, fd, 0);
        require(p != MAP_FAILED, "mmap");
        static const volatile char* past_eof;
        past_eof = static_cast<const volatile char*>(p);
        no_core_file();
        weft::coroutine<> co([](weft::yielder<>&) { g_sink = *past_eof; }, {.name = "bus"});
        (void)co.resume();
    };
    EXPECT_EXIT(statement(), ExitedWithCode(44), no_overflow_report("bus handler: SIGBUS, BUS_ADRERR"));
}

TEST_F(stack_overflow, a_fault_previously_ignored_still_kills_instead_of_looping) {
    // The kernel never lets a faulting instruction be ignored; neither does
    // the chain.
    ASSERT_TRUE(fault_actions_are_defaults()) << parent_touched_weft;
    auto statement = [] {
        ::signal(SIGSEGV, SIG_IGN);
        fault_in_coroutine();
    };
    EXPECT_EXIT(statement(), KilledBySignal(SIGSEGV), no_overflow_report());
}

// ---------------------------------------------------------------------------
// Alternate signal stacks

TEST_F(stack_overflow, a_fresh_thread_gets_an_alternate_stack_that_goes_away_with_it) {
    auto checks = [] {
        void* installed = nullptr;
        std::thread t([&] {
            stack_t before{};
            require(::sigaltstack(nullptr, &before) == 0, "sigaltstack");
            require((before.ss_flags & SS_DISABLE) != 0, "a fresh thread starts without an alternate stack");
            run_one();
            stack_t after{};
            require(::sigaltstack(nullptr, &after) == 0, "sigaltstack");
            require((after.ss_flags & SS_DISABLE) == 0, "running a coroutine gives the thread an alternate stack");
            require(after.ss_size >= 64 * 1024, "the alternate stack has at least 64 KiB");
            installed = after.ss_sp;
            run_one();
            stack_t again{};
            require(::sigaltstack(nullptr, &again) == 0 && again.ss_sp == installed, "it is installed once");
        });
        t.join();
        unsigned char resident;
        require(::mincore(installed, 1, &resident) != 0 && errno == ENOMEM,
                "the alternate stack is unmapped when its thread exits");
    };
    EXPECT_EXIT(checked_child(checks), ExitedWithCode(0), "");
}

TEST_F(stack_overflow, a_thread_with_its_own_alternate_stack_keeps_it) {
    auto checks = [] {
        std::thread t([] {
            std::vector<unsigned char> own(32 * 1024);
            stack_t ss{};
            ss.ss_sp = own.data();
            ss.ss_size = own.size();
            require(::sigaltstack(&ss, nullptr) == 0, "sigaltstack");
            run_one();
            stack_t after{};
            require(::sigaltstack(nullptr, &after) == 0, "sigaltstack");
            require(after.ss_sp == own.data() && after.ss_size == own.size() && (after.ss_flags & SS_DISABLE) == 0,
                    "the thread's own alternate stack is still installed");
            ss.ss_flags = SS_DISABLE;
            require(::sigaltstack(&ss, nullptr) == 0, "sigaltstack");  // `own` dies with this frame
        });
        t.join();
    };
    EXPECT_EXIT(checked_child(checks), ExitedWithCode(0), "");
}

// ---------------------------------------------------------------------------
// Stack clash: a frame larger than the guard page

TEST_F(stack_overflow, a_frame_larger_than_the_guard_is_caught_with_stack_clash_protection) {
    auto statement = [] {
        no_core_file();
        weft::coroutine<> co(std::allocator_arg, weft::mmap_stack{},
                             [](weft::yielder<>&) { g_sink = static_cast<std::size_t>(weft_test::big_frame_probed(7)); },
                             {.stack_size = small_stack, .name = "clash"});
        (void)co.resume();
    };
    EXPECT_EXIT(statement(), KilledBySignal(SIGSEGV), reports_overflow("'clash'"));
}

// below_the_guard is a stack with a read-write mapping right below its guard
// page, as an mmap_stack may have (another stack, a heap arena, a file):
//   [ neighbour 64 KiB, read-write ][ guard 1 page ][ stack 64 KiB ]
struct below_the_guard {
    std::size_t page = weft::page_size();
    std::size_t neighbour_size = 64 * 1024;
    std::size_t total = neighbour_size + page + small_stack;
    std::byte* region = nullptr;

    below_the_guard() {
        void* p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        require(p != MAP_FAILED, "mmap");
        region = static_cast<std::byte*>(p);
        require(::mprotect(region + neighbour_size, page, PROT_NONE) == 0, "mprotect");
        std::memset(region, 0x5A, neighbour_size);
    }
    ~below_the_guard() { ::munmap(region, total); }

    [[nodiscard]] bool neighbour_intact() const {
        for (std::size_t i = 0; i < neighbour_size; ++i)
            if (region[i] != std::byte{0x5A}) return false;
        return true;
    }
};

// fixed_stack hands out the stack of a below_the_guard layout.
struct fixed_stack {
    below_the_guard* layout;
    weft::stack_view allocate(std::size_t) {
        return {layout->region + layout->neighbour_size + layout->page, small_stack, layout->page};
    }
    void deallocate(weft::stack_view) noexcept {}
};

TEST_F(stack_overflow, without_stack_clash_protection_the_same_frame_silently_writes_below_the_guard) {
    // This documents the hazard; it is not something weft can catch.
    auto checks = [] {
        below_the_guard layout;
        require(layout.neighbour_intact(), "canary written");
        {
            weft::coroutine<> co(std::allocator_arg, fixed_stack{&layout},
                                 [](weft::yielder<>&) {
                                     g_sink = static_cast<std::size_t>(weft_test::big_frame_unprobed(7));
                                 },
                                 {.stack_size = small_stack, .name = "no probes"});
            require(!co.resume(), "the coroutine returns normally: nothing faulted");
        }
        require(!layout.neighbour_intact(), "the 96 KiB frame wrote into the mapping below the guard page");
    };
    EXPECT_EXIT(checked_child(checks), ExitedWithCode(0), "");
}

}  // namespace
