// intrusive_list_test.cpp: detail::intrusive_list and detail::intrusive_fifo
// (weft/detail/intrusive_list.hpp, below every layer; tested here with the
// other support helpers): order of push_back / push_front / pop_front, remove
// of the head, the tail and a middle node, LIST-IL2 (the links of neighbours and
// the ends) and LIST-IL3 (null links after leaving), a node in two lists at once,
// a list without a tail.

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "weft/detail/intrusive_list.hpp"

namespace {

struct node {
    int value = 0;
    node* prev = nullptr;
    node* next = nullptr;
    node* other_prev = nullptr;  // a second list's links
    node* other_next = nullptr;
};

using list = weft::detail::intrusive_list<node, weft::detail::list_links<node, &node::prev, &node::next>>;
using other_list =
    weft::detail::intrusive_list<node, weft::detail::list_links<node, &node::other_prev, &node::other_next>>;
using fifo = weft::detail::intrusive_fifo<node, weft::detail::fifo_link<node, &node::next>>;

// values() walks l forwards and checks LIST-IL2 on the way: the head has no prev,
// every node's prev is the node before it, the last node is back().
std::vector<int> values(const list& l) {
    std::vector<int> out;
    node* before = nullptr;
    for (node* n = l.front(); n; n = list::next(n)) {
        EXPECT_EQ(n->prev, before) << "node " << n->value << ": prev is not the node before it";
        out.push_back(n->value);
        before = n;
    }
    EXPECT_EQ(l.back(), before) << "back() is not the last node";
    EXPECT_EQ(l.empty(), out.empty());
    return out;
}

void expect_unlinked(const node& n) {
    EXPECT_EQ(n.prev, nullptr) << "node " << n.value;
    EXPECT_EQ(n.next, nullptr) << "node " << n.value;
}

using v = std::vector<int>;

// numbered() gives n[i] the value i; push_all() links them in index order
// through `push` (push_back or push_front).
template <std::size_t N>
void numbered(node (&n)[N]) {
    for (std::size_t i = 0; i < N; ++i) n[i].value = static_cast<int>(i);
}
template <class L, std::size_t N>
void push_all(L& l, node (&n)[N], void (L::*push)(node*)) {
    numbered(n);
    for (node& x : n) (l.*push)(&x);
}

TEST(intrusive_list, a_new_list_is_empty) {
    list l;
    EXPECT_TRUE(l.empty());
    EXPECT_EQ(l.front(), nullptr);
    EXPECT_EQ(l.back(), nullptr);
    EXPECT_EQ(l.pop_front(), nullptr);
}

TEST(intrusive_list, push_back_then_pop_front_is_first_in_first_out) {
    node n[4];
    list l;
    push_all(l, n, &list::push_back);
    EXPECT_EQ(values(l), (v{0, 1, 2, 3}));
    for (int i = 0; i < 4; ++i) {
        node* p = l.pop_front();
        ASSERT_EQ(p, &n[i]);
        expect_unlinked(*p);
        if (i < 3) {
            EXPECT_EQ(l.front()->prev, nullptr);
        }
    }
    EXPECT_TRUE(l.empty());
    EXPECT_EQ(l.back(), nullptr);
    EXPECT_EQ(l.pop_front(), nullptr);
}

TEST(intrusive_list, push_front_puts_the_newest_first) {
    node n[3];
    list l;
    push_all(l, n, &list::push_front);
    EXPECT_EQ(values(l), (v{2, 1, 0}));
    EXPECT_EQ(l.back(), &n[0]);
    node extra{.value = 9};
    l.push_back(&extra);
    EXPECT_EQ(values(l), (v{2, 1, 0, 9}));
}

TEST(intrusive_list, removing_the_head_the_tail_and_a_middle_node_keeps_the_links_consistent) {
    node n[5];
    list l;
    push_all(l, n, &list::push_back);
    l.remove(&n[2]);  // middle
    expect_unlinked(n[2]);
    EXPECT_EQ(values(l), (v{0, 1, 3, 4}));
    l.remove(&n[0]);  // head
    expect_unlinked(n[0]);
    EXPECT_EQ(values(l), (v{1, 3, 4}));
    EXPECT_EQ(l.front(), &n[1]);
    l.remove(&n[4]);  // tail
    expect_unlinked(n[4]);
    EXPECT_EQ(values(l), (v{1, 3}));
    EXPECT_EQ(l.back(), &n[3]);
    EXPECT_EQ(n[3].next, nullptr);
    // A removed node can go back in, at either end.
    l.push_back(&n[2]);
    l.push_front(&n[0]);
    EXPECT_EQ(values(l), (v{0, 1, 3, 2}));
    for (node& x : n)
        if (&x != &n[4]) l.remove(&x);
    EXPECT_TRUE(l.empty());
    EXPECT_EQ(l.front(), nullptr);
    EXPECT_EQ(l.back(), nullptr);
    for (const node& x : n) expect_unlinked(x);
}

TEST(intrusive_list, removing_the_only_node_empties_the_list) {
    node a{.value = 1};
    list l;
    l.push_back(&a);
    EXPECT_EQ(l.front(), &a);
    EXPECT_EQ(l.back(), &a);
    l.remove(&a);
    EXPECT_TRUE(l.empty());
    EXPECT_EQ(l.back(), nullptr);
    expect_unlinked(a);
    // The emptied list works as a new one.
    l.push_front(&a);
    EXPECT_EQ(values(l), (v{1}));
}

TEST(intrusive_list, take_moves_every_node_and_leaves_the_list_empty) {
    node n[3];
    list l;
    push_all(l, n, &list::push_back);
    list moved = l.take();
    EXPECT_TRUE(l.empty());
    EXPECT_EQ(l.back(), nullptr);
    EXPECT_EQ(values(moved), (v{0, 1, 2}));
    l.push_back(moved.pop_front());
    EXPECT_EQ(values(l), (v{0}));
    EXPECT_EQ(values(moved), (v{1, 2}));
}

TEST(intrusive_list, a_node_in_two_lists_leaves_one_without_touching_the_other) {
    node n[3];
    list a;
    other_list b;
    for (int i = 0; i < 3; ++i) {
        n[i].value = i;
        a.push_back(&n[i]);
        b.push_front(&n[i]);
    }
    b.remove(&n[1]);
    EXPECT_EQ(values(a), (v{0, 1, 2}));  // a's links untouched
    EXPECT_EQ(b.front(), &n[2]);
    EXPECT_EQ(other_list::next(&n[2]), &n[0]);
    EXPECT_EQ(n[0].other_prev, &n[2]);
    EXPECT_EQ(n[1].other_prev, nullptr);
    EXPECT_EQ(n[1].other_next, nullptr);
}

TEST(intrusive_list, a_list_without_a_tail_is_one_pointer_and_keeps_its_order) {
    using head_only =
        weft::detail::intrusive_list<node, weft::detail::list_links<node, &node::prev, &node::next>, false>;
    static_assert(sizeof(head_only) == sizeof(node*), "a list without a tail is its head pointer");
    node n[4];
    head_only l;
    push_all(l, n, &head_only::push_front);
    std::vector<int> seen;
    for (node* x = l.front(); x; x = head_only::next(x)) seen.push_back(x->value);
    EXPECT_EQ(seen, (v{3, 2, 1, 0}));
    l.remove(&n[0]);  // the last node
    expect_unlinked(n[0]);
    EXPECT_EQ(n[1].next, nullptr);
    l.remove(&n[3]);  // the head
    expect_unlinked(n[3]);
    EXPECT_EQ(l.front(), &n[2]);
    EXPECT_EQ(n[2].prev, nullptr);
    head_only moved = l.take();
    EXPECT_TRUE(l.empty());
    EXPECT_EQ(moved.pop_front(), &n[2]);
    EXPECT_EQ(moved.pop_front(), &n[1]);
    EXPECT_EQ(moved.pop_front(), nullptr);
    EXPECT_TRUE(moved.empty());
    for (const node& x : n) expect_unlinked(x);
}

TEST(intrusive_fifo, push_pop_and_append_keep_first_in_first_out) {
    node n[6];
    numbered(n);
    fifo f;
    EXPECT_TRUE(f.empty());
    EXPECT_EQ(f.pop_front(), nullptr);
    f.push_back(&n[0]);
    f.push_back(&n[1]);
    f.push_back(&n[2]);
    fifo g;
    f.append(g);  // appending an empty one changes nothing
    g.push_back(&n[3]);
    g.push_back(&n[4]);
    f.append(g);
    EXPECT_TRUE(g.empty());
    EXPECT_EQ(g.pop_front(), nullptr);
    f.push_back(&n[5]);  // the tail moved to g's last node
    for (int i = 0; i < 6; ++i) {
        node* p = f.pop_front();
        ASSERT_EQ(p, &n[i]);
        EXPECT_EQ(p->next, nullptr);
    }
    EXPECT_TRUE(f.empty());
    // An emptied fifo works as a new one, and so does appending into it.
    g.push_back(&n[1]);
    f.append(g);
    f.push_back(&n[0]);
    EXPECT_EQ(f.pop_front(), &n[1]);
    EXPECT_EQ(f.pop_front(), &n[0]);
    EXPECT_EQ(f.pop_front(), nullptr);
}

}  // namespace
