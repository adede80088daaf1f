// trace.cpp: the task trace (observe.hpp, OBSERVE-O3; docs/debugging.md): events
// recorded per worker while the runtime runs, written as Chrome / Perfetto
// trace-event JSON when it stops. Each worker appends to its own buffer, so
// recording takes no lock; the buffers are read only after the workers have
// been joined.

#include "observe.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "weft/detail/task_record.hpp"

namespace weft::detail {

void trace_buffer::push(const trace_event& e) noexcept {
    if (events.size() >= cap_) {
        ++dropped;
        return;
    }
    try {
        if (events.capacity() == events.size()) events.reserve(std::min(cap_, std::max<std::size_t>(1024, 2 * events.size())));
        events.push_back(e);
    } catch (...) {
        ++dropped;  // out of memory: the trace loses the event, the runtime goes on
    }
}

void trace_buffer::name(const task_record* t) noexcept {
    // Called once per task, at its spawn (every task is spawned after the
    // trace began); bounded like the events: past the bound the writer
    // calls a task "task <id>".
    if (t->name.empty() || names.size() >= cap_) return;
    try {
        names.emplace_back(t->id, std::string(t->name));
    } catch (...) {
    }
}

void trace_buffer::begin_run(const task_record* t) noexcept {
    const std::int64_t now = steady_now_ns();
    if (run_start_ >= 0) push({run_start_, now, run_id_, 0, trace_event::run});
    run_start_ = now;
    run_id_ = t->id;
}

void trace_buffer::end_run() noexcept {
    if (run_start_ < 0) return;
    push({run_start_, steady_now_ns(), run_id_, 0, trace_event::run});
    run_start_ = -1;
}

void trace_buffer::begin_sleep() noexcept { sleep_start_ = steady_now_ns(); }

void trace_buffer::end_sleep() noexcept {
    if (sleep_start_ < 0) return;
    push({sleep_start_, steady_now_ns(), 0, 0, trace_event::sleep});
    sleep_start_ = -1;
}

void trace_buffer::instant(trace_event::kind k, std::uint64_t id, std::uint32_t arg) noexcept {
    push({steady_now_ns(), 0, id, arg, k});
}

namespace {

// json_string() writes s as a JSON string (quotes, escapes, control bytes).
void json_string(std::FILE* f, std::string_view s) {
    std::fputc('"', f);
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\') {
            std::fputc('\\', f);
            std::fputc(ch, f);
        } else if (c < 0x20) {
            std::fprintf(f, "\\u%04x", c);
        } else {
            std::fputc(ch, f);
        }
    }
    std::fputc('"', f);
}

// span_dur() is a span's length written 1 ns short: a span that ends where
// the next begins (a hand-off) would otherwise overlap it by a rounding
// error in viewers that add ts and dur in floating point, and speedscope
// then nests every later span inside it.
std::int64_t span_dur(const trace_event& e) noexcept { return e.t1 - e.t0 > 1 ? e.t1 - e.t0 - 1 : 0; }

// Microseconds with three decimals: the trace-event format's unit.
void micros(std::FILE* f, std::int64_t ns) {
    if (ns < 0) ns = 0;
    std::fprintf(f, "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000);
}

struct name_table {
    std::vector<std::pair<std::uint64_t, std::string>> v;
    const std::string* find(std::uint64_t id) const {
        auto it = std::lower_bound(v.begin(), v.end(), id, [](const auto& p, std::uint64_t k) { return p.first < k; });
        return it != v.end() && it->first == id ? &it->second : nullptr;
    }
};

void task_name(std::FILE* f, const name_table& names, std::uint64_t id) {
    if (const std::string* n = names.find(id)) {
        json_string(f, *n);
    } else {
        std::fprintf(f, "\"task %" PRIu64 "\"", id);
    }
}

}  // namespace

bool write_trace(const std::string& path, unsigned workers, const std::vector<trace_buffer*>& buffers,
                 std::int64_t origin_ns) noexcept {
    try {
        name_table names;
        std::uint64_t dropped = 0;
        for (const trace_buffer* b : buffers) {
            names.v.insert(names.v.end(), b->names.begin(), b->names.end());
            dropped += b->dropped;
        }
        std::sort(names.v.begin(), names.v.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        names.v.erase(std::unique(names.v.begin(), names.v.end(), [](const auto& a, const auto& b) { return a.first == b.first; }),
                      names.v.end());

        std::FILE* f = std::fopen(path.c_str(), "w");
        if (!f) {
            std::fprintf(stderr, "weft: cannot write the task trace to %s: %s\n", path.c_str(), std::strerror(errno));
            return false;
        }
        std::fputs("{\"traceEvents\":[\n", f);
        std::fputs("{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{\"name\":\"weft runtime\"}}", f);
        for (unsigned i = 0; i < buffers.size(); ++i) {
            std::fprintf(f, ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"name\":\"thread_name\",\"args\":{\"name\":", i);
            if (i < workers)
                std::fprintf(f, "\"worker %u\"}}", i);
            else
                std::fputs("\"other threads\"}}", f);
            std::fprintf(f, ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%u}}", i, i);
        }
        for (unsigned i = 0; i < buffers.size(); ++i) {
            for (const trace_event& e : buffers[i]->events) {
                std::fprintf(f, ",\n{\"pid\":1,\"tid\":%u,\"ts\":", i);
                micros(f, e.t0 - origin_ns);
                switch (e.what) {
                case trace_event::run:
                    std::fputs(",\"ph\":\"X\",\"dur\":", f);
                    micros(f, span_dur(e));
                    std::fputs(",\"cat\":\"task\",\"name\":", f);
                    task_name(f, names, e.id);
                    std::fprintf(f, ",\"args\":{\"id\":%" PRIu64 "}}", e.id);
                    break;
                case trace_event::sleep:
                    std::fputs(",\"ph\":\"X\",\"dur\":", f);
                    micros(f, span_dur(e));
                    std::fputs(",\"cat\":\"sleep\",\"name\":\"asleep\"}", f);
                    break;
                case trace_event::spawn:
                    std::fprintf(f, ",\"ph\":\"i\",\"s\":\"t\",\"cat\":\"spawn\",\"name\":\"spawn\",\"args\":{\"id\":%" PRIu64 ",\"task\":", e.id);
                    task_name(f, names, e.id);
                    std::fputs("}}", f);
                    break;
                case trace_event::wake:
                    std::fprintf(f, ",\"ph\":\"i\",\"s\":\"t\",\"cat\":\"wake\",\"name\":\"wake\",\"args\":{\"id\":%" PRIu64 "}}", e.id);
                    break;
                case trace_event::steal:
                    std::fprintf(f, ",\"ph\":\"i\",\"s\":\"t\",\"cat\":\"steal\",\"name\":\"steal\",\"args\":{\"victim\":%" PRIu64 ",\"tasks\":%u}}",
                                 e.id, e.arg);
                    break;
                case trace_event::timers:
                    std::fprintf(f, ",\"ph\":\"i\",\"s\":\"t\",\"cat\":\"timers\",\"name\":\"timers\",\"args\":{\"fired\":%" PRIu64 "}}", e.id);
                    break;
                }
            }
        }
        std::fprintf(f, "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"workers\":%u,\"dropped\":%" PRIu64 "}}\n", workers, dropped);
        const bool ok = !std::ferror(f);
        if (std::fclose(f) != 0 || !ok) {
            std::fprintf(stderr, "weft: writing the task trace to %s failed\n", path.c_str());
            return false;
        }
        return true;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "weft: cannot write the task trace to %s: %s\n", path.c_str(), e.what());
        return false;
    }
}

}  // namespace weft::detail
