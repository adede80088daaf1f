// weft/detail/intrusive_list.hpp: the intrusive lists every layer links its
// records into (below all layers, like weft/detail/support.hpp: it includes
// nothing of weft and knows no layer's types).
//
//   intrusive_list    doubly linked: O(1) push_back, push_front, pop_front,
//                     remove of any node; or, without its tail pointer,
//                     push_front, pop_front and remove only (a table of
//                     lists, e.g. a timer wheel's slots, where the tail would
//                     double the table, and the registries, which never need
//                     the end; the tail costs a store on every push and
//                     remove that empties or fills a list)
//   intrusive_fifo    singly linked: O(1) push_back, pop_front, append; for
//                     queues that never remove from the middle, where a
//                     second pointer per node would cost
//
// A node carries its own links as plain pointer members (T* prev, T* next,
// named as the node's type likes); the list is told which members through a
// links type (list_links / fifo_link below, or a type of the user's with the
// same static functions). So a node costs exactly its link pointers, a list
// exactly its head and tail pointers (or its head only), and every access
// compiles to a plain load or store at a fixed offset. A node may sit in
// several lists at once through different link members (a task record: its
// run queue and its registry).
//
// Invariants (per list, under whatever guards the list):
//   LIST-IL1  A node is in at most one list through a given pair of links, and a
//             list only ever holds nodes pushed into it and not popped or removed
//             since.
//   LIST-IL2  head is null exactly when tail is null (the list is empty; a list
//             without a tail: head is null); the head's prev and the last node's
//             next are null; for consecutive nodes a, b: next(a) == b and
//             (intrusive_list) prev(b) == a; tail is the last node.
//   LIST-IL3  A node leaves a list with null links (pop_front, remove): a node
//             that was never linked, or has been unlinked, has null links,
//             provided it started with null links. The list never reads the links
//             of a node that is not in it, so a caller may reuse an unlinked
//             node's links (e.g. to chain woken nodes) until it links it again.
#pragma once

#include <type_traits>

namespace weft::detail {

// list_links<T, &T::prev, &T::next> names the two link members of a node of
// an intrusive_list.
template <class T, T* T::*Prev, T* T::*Next>
struct list_links {
    static T*& prev(T& n) noexcept { return n.*Prev; }
    static T*& next(T& n) noexcept { return n.*Next; }
};

// fifo_link<T, &T::next> names the one link member of a node of an
// intrusive_fifo.
template <class T, T* T::*Next>
struct fifo_link {
    static T*& next(T& n) noexcept { return n.*Next; }
};

// no_tail is the tail of an intrusive_list that keeps none (takes no room).
struct no_tail {};

// intrusive_list<T, Links> is a doubly linked list of T through the members
// Links names (list_links). It owns nothing: nodes outlive their time in it.
// Not synchronised. Links may be incomplete where the list is declared; it
// must be complete where the list's functions are used. WithTail = false
// drops the tail pointer, and with it push_back() and back().
template <class T, class Links, bool WithTail = true>
class intrusive_list {
public:
    constexpr intrusive_list() noexcept = default;
    intrusive_list(const intrusive_list&) = delete;
    intrusive_list& operator=(const intrusive_list&) = delete;
    // Moving takes every node (the source is left empty).
    constexpr intrusive_list(intrusive_list&& o) noexcept : head_(o.head_), tail_(o.tail_) {
        o.head_ = nullptr;
        if constexpr (WithTail) o.tail_ = nullptr;
    }

    [[nodiscard]] bool empty() const noexcept { return head_ == nullptr; }
    [[nodiscard]] T* front() const noexcept { return head_; }
    [[nodiscard]] T* back() const noexcept
        requires WithTail
    {
        return tail_;
    }
    // next() is the node after n in the list, or null (n is in this list).
    [[nodiscard]] static T* next(T* n) noexcept { return Links::next(*n); }

    // push_back() / push_front() link n at the end / the start. Requires: n
    // is in no list through these links (LIST-IL1).
    void push_back(T* n) noexcept
        requires WithTail
    {
        Links::next(*n) = nullptr;
        Links::prev(*n) = tail_;
        if (tail_)
            Links::next(*tail_) = n;
        else
            head_ = n;
        tail_ = n;
    }
    void push_front(T* n) noexcept {
        Links::prev(*n) = nullptr;
        Links::next(*n) = head_;
        if (head_)
            Links::prev(*head_) = n;
        else if constexpr (WithTail)
            tail_ = n;
        head_ = n;
    }

    // pop_front() unlinks and returns the first node, or null if empty.
    T* pop_front() noexcept {
        T* const n = head_;
        if (!n) return nullptr;
        head_ = Links::next(*n);
        if (head_)
            Links::prev(*head_) = nullptr;
        else if constexpr (WithTail)
            tail_ = nullptr;
        Links::next(*n) = nullptr;  // prev(n) is null already (LIST-IL2)
        return n;
    }

    // remove() unlinks n. Requires: n is in this list.
    void remove(T* n) noexcept {
        T* const p = Links::prev(*n);
        T* const x = Links::next(*n);
        if (p)
            Links::next(*p) = x;
        else
            head_ = x;
        if (x)
            Links::prev(*x) = p;
        else if constexpr (WithTail)
            tail_ = p;
        Links::prev(*n) = Links::next(*n) = nullptr;
    }

    // take() moves every node out into a new list, leaving this one empty.
    [[nodiscard]] intrusive_list take() noexcept { return intrusive_list(static_cast<intrusive_list&&>(*this)); }

private:
    T* head_ = nullptr;  // first: a debugger reads a list's head at its address
    [[no_unique_address]] std::conditional_t<WithTail, T*, no_tail> tail_{};
};

// intrusive_fifo<T, Link> is a singly linked FIFO of T through the member
// Link names (fifo_link). Same rules as intrusive_list, without remove().
template <class T, class Link>
class intrusive_fifo {
public:
    constexpr intrusive_fifo() noexcept = default;
    intrusive_fifo(const intrusive_fifo&) = delete;
    intrusive_fifo& operator=(const intrusive_fifo&) = delete;

    [[nodiscard]] bool empty() const noexcept { return head_ == nullptr; }
    [[nodiscard]] T* front() const noexcept { return head_; }

    // push_back() links n at the end. Requires: n is in no list through
    // this link (LIST-IL1).
    void push_back(T* n) noexcept {
        Link::next(*n) = nullptr;
        if (tail_)
            Link::next(*tail_) = n;
        else
            head_ = n;
        tail_ = n;
    }

    // pop_front() unlinks and returns the first node, or null if empty.
    T* pop_front() noexcept {
        T* n = head_;
        if (!n) return nullptr;
        head_ = Link::next(*n);
        if (!head_) tail_ = nullptr;
        Link::next(*n) = nullptr;
        return n;
    }

    // append() moves every node of o, in order, to the end of this one; o is
    // left empty.
    void append(intrusive_fifo& o) noexcept {
        if (!o.head_) return;
        if (tail_)
            Link::next(*tail_) = o.head_;
        else
            head_ = o.head_;
        tail_ = o.tail_;
        o.head_ = o.tail_ = nullptr;
    }

private:
    T* head_ = nullptr;
    T* tail_ = nullptr;
};

}  // namespace weft::detail
