/* fusion._kernel: fusion's per-candidate loops in C (optional; see fusion/compiled.py).
 *
 * Every function here has a pure-Python twin in the module that calls it, which stays the reference and the
 * fallback (the table in docs/ranking.md, "Compiled loops"); tests/fusion/test_kernel.py runs both on the same
 * inputs and compares everything they leave behind. A function that meets an input its twin handles differently
 * (a non-str id or key, a NaN score, a naive date among aware ones, ...) returns None before changing anything,
 * and the caller runs the twin. Strings are compared by their UTF-8 bytes (str equality) and only for exact str
 * objects; sums are added in the twin's order and the file is compiled with -ffp-contract=off, so every float
 * rounds as in Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <datetime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static PyObject *s_domain, *s_title, *s_title_key, *s_parent, *s_why_title, *s_id, *s_score;
static PyObject *s_f_hit, *s_f_total, *s_f_scores, *s_f_lanes, *s_f_ranks, *s_f_stage, *s_f_merged;

/* ------------------------------------------------------------------ attribute reads */

/* Where a class keeps some attributes in __slots__, to read them without a lookup per object. Used only for
 * objects of exactly that class, whose attribute access is the generic one and whose attribute is a plain slot
 * (a member descriptor): then reading the slot is what getattr does. Anything else goes through getattr. */
typedef struct {
    PyTypeObject *type;
    Py_ssize_t off[8];
} Slots;

static void slots_init_type(Slots *sl, PyTypeObject *type, PyObject *const *names, int count) {
    sl->type = NULL;
    if (type->tp_getattro != PyObject_GenericGetAttr) return;
    for (int k = 0; k < count; k++) {
        sl->off[k] = -1;
        PyObject *descr = PyObject_GetAttr((PyObject *)type, names[k]);
        if (descr == NULL) {
            PyErr_Clear();
            continue;
        }
        if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
            PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
            if (m->type == T_OBJECT_EX && !(m->flags & PY_AUDIT_READ)) sl->off[k] = m->offset;
        }
        Py_DECREF(descr);
    }
    sl->type = type;
}

static void slots_init(Slots *sl, PyObject *obj, PyObject *const *names, int count) {
    slots_init_type(sl, Py_TYPE(obj), names, count);
}

/* obj.<names[k]> as a new reference (NULL with an exception set, as getattr). */
static PyObject *slot_get(const Slots *sl, PyObject *obj, int k, PyObject *name) {
    if (Py_TYPE(obj) == sl->type && sl->off[k] >= 0) {
        PyObject *v = *(PyObject **)((char *)obj + sl->off[k]);
        if (v != NULL) return Py_NewRef(v);
    }
    return PyObject_GetAttr(obj, name);
}

/* ------------------------------------------------------------------ word interning (byte-exact) */

typedef struct {
    uint64_t h;
    const char *p;
    int32_t len;
    int32_t id; /* -1: empty slot */
} Word;

typedef struct {
    Word *slots;
    size_t mask;
    Py_ssize_t count;
} WordTable;

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

/* A hash of p[0:len] read eight bytes at a time (equality is always checked on the bytes). `end`, where not
 * NULL, is the end of a str's data, which its terminating NUL follows: a last partial group that stays within the
 * data and the NUL is read whole and masked (little-endian machines); otherwise it is read byte by byte. */
static uint64_t word_hash(const unsigned char *p, Py_ssize_t len, const unsigned char *end) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)len;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
        p += 8;
        len -= 8;
    }
    if (len > 0) {
        uint64_t w = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        if (end != NULL && p + 8 <= end + 1) {
            memcpy(&w, p, 8);
            w &= ((uint64_t)1 << (8 * len)) - 1; /* the word's own bytes only */
        } else
#endif
            for (Py_ssize_t k = 0; k < len; k++) w |= (uint64_t)p[k] << (8 * k);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
    }
    return h;
}

static uint64_t hash_bytes(const char *p, Py_ssize_t len) {
    return mix64(word_hash((const unsigned char *)p, len, NULL));
}

static int words_init(WordTable *t, size_t expected) {
    size_t cap = 64;
    while (cap < expected * 2) cap <<= 1;
    t->slots = PyMem_Malloc(cap * sizeof(Word));
    if (t->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < cap; i++) t->slots[i].id = -1;
    t->mask = cap - 1;
    t->count = 0;
    return 0;
}

static int words_grow(WordTable *t) {
    size_t cap = (t->mask + 1) * 2;
    Word *slots = PyMem_Malloc(cap * sizeof(Word));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < cap; i++) slots[i].id = -1;
    for (size_t i = 0; i <= t->mask; i++) {
        Word *w = &t->slots[i];
        if (w->id < 0) continue;
        size_t at = (size_t)w->h & (cap - 1);
        while (slots[at].id >= 0) at = (at + 1) & (cap - 1);
        slots[at] = *w;
    }
    PyMem_Free(t->slots);
    t->slots = slots;
    t->mask = cap - 1;
    return 0;
}

/* The id of the word p[0:len] with hash h (a new one if unseen), or -1 on error. */
static Py_ssize_t words_id_h(WordTable *t, const char *p, Py_ssize_t len, uint64_t h) {
    if ((size_t)(t->count + 1) * 2 > t->mask + 1 && words_grow(t) < 0) return -1;
    size_t at = (size_t)h & t->mask;
    for (;;) {
        Word *w = &t->slots[at];
        if (w->id < 0) {
            w->h = h;
            w->p = p;
            w->len = (int32_t)len;
            w->id = (int32_t)t->count++;
            return w->id;
        }
        if (w->h == h && w->len == len && memcmp(w->p, p, (size_t)len) == 0) return w->id;
        at = (at + 1) & t->mask;
    }
}

/* The id of the word p[0:len] (a new one if unseen), or -1 on error. */
static Py_ssize_t words_id(WordTable *t, const char *p, Py_ssize_t len) {
    return words_id_h(t, p, len, hash_bytes(p, len));
}

/* The id of an exact str in t (equal strings, equal ids: the same UTF-8 bytes); -2 for anything else (the caller
 * then uses Python's own equality), -1 on error. The table points into the string's buffer: keep it alive. */
static Py_ssize_t str_id(WordTable *t, PyObject *s) {
    if (!PyUnicode_CheckExact(s)) return -2;
    Py_ssize_t len;
    const char *p = PyUnicode_AsUTF8AndSize(s, &len);
    if (p == NULL) {
        PyErr_Clear();
        return -2;
    }
    return words_id(t, p, len);
}

/* str_id by str's own hash: computed once per string and kept in it, so the passes that look up the same
 * domains (title join, domain diversity, authority) share it. Equality is still decided on the bytes. */
static Py_ssize_t domain_id(WordTable *t, PyObject *s) {
    if (!PyUnicode_CheckExact(s)) return -2;
    Py_ssize_t len;
    const char *p = PyUnicode_AsUTF8AndSize(s, &len);
    if (p == NULL) {
        PyErr_Clear();
        return -2;
    }
    Py_hash_t h = PyObject_Hash(s);
    if (h == -1) return -1;
    return words_id_h(t, p, len, mix64((uint64_t)h));
}

/* ------------------------------------------------------------------ (domain, word) keys */

typedef struct {
    uint64_t key; /* domain << 32 | word, plus one (0: empty slot) */
    Py_ssize_t idx;
} KeySlot;

typedef struct {
    KeySlot *slots;
    size_t mask;
    Py_ssize_t count;
} KeyTable;

static int keys_init(KeyTable *t, size_t expected) {
    size_t cap = 64;
    while (cap < expected * 2) cap <<= 1;
    t->slots = PyMem_Calloc(cap, sizeof(KeySlot));
    if (t->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    t->mask = cap - 1;
    t->count = 0;
    return 0;
}

static int keys_grow(KeyTable *t) {
    size_t cap = (t->mask + 1) * 2;
    KeySlot *slots = PyMem_Calloc(cap, sizeof(KeySlot));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i <= t->mask; i++) {
        if (!t->slots[i].key) continue;
        size_t at = (size_t)mix64(t->slots[i].key) & (cap - 1);
        while (slots[at].key) at = (at + 1) & (cap - 1);
        slots[at] = t->slots[i];
    }
    PyMem_Free(t->slots);
    t->slots = slots;
    t->mask = cap - 1;
    return 0;
}

/* The index of key (dom, word), a new one if unseen; -1 on error. */
static Py_ssize_t keys_idx(KeyTable *t, Py_ssize_t dom, Py_ssize_t word) {
    if ((size_t)(t->count + 1) * 2 > t->mask + 1 && keys_grow(t) < 0) return -1;
    uint64_t key = (((uint64_t)dom << 32) | (uint64_t)word) + 1;
    size_t at = (size_t)mix64(key) & t->mask;
    for (;;) {
        KeySlot *s = &t->slots[at];
        if (!s->key) {
            s->key = key;
            s->idx = t->count++;
            return s->idx;
        }
        if (s->key == key) return s->idx;
        at = (at + 1) & t->mask;
    }
}

/* ------------------------------------------------------------------ union-find (fusion.setjoin.Groups) */

static PyObject *s_columns, *s_why;

/* The root of i in parent (a list of ints), halving the path on the way as Groups.find does. -1 on error. */
static Py_ssize_t find_halving(PyObject *parent, Py_ssize_t i) {
    Py_ssize_t n = PyList_GET_SIZE(parent);
    for (;;) {
        if (i < 0 || i >= n) {
            PyErr_SetString(PyExc_IndexError, "groups.parent is shorter than the rows");
            return -1;
        }
        Py_ssize_t p = PyLong_AsSsize_t(PyList_GET_ITEM(parent, i));
        if (p == -1 && PyErr_Occurred()) return -1;
        if (p == i) return i;
        if (p < 0 || p >= n) {
            PyErr_SetString(PyExc_IndexError, "groups.parent holds a row out of range");
            return -1;
        }
        PyObject *up = PyList_GET_ITEM(parent, p);
        PyList_SetItem(parent, i, Py_NewRef(up)); /* p[i] = p[p[i]] */
        i = PyLong_AsSsize_t(up);
        if (i == -1 && PyErr_Occurred()) return -1;
    }
}

/* Compare two exact ints (-1, 0, 1); 2 when one is not an exact int or does not fit a long long. */
static int cmp_small_int(PyObject *a, PyObject *b) {
    if (!PyLong_CheckExact(a) || !PyLong_CheckExact(b)) return 2;
    int oa, ob;
    long long x = PyLong_AsLongLongAndOverflow(a, &oa), y = PyLong_AsLongLongAndOverflow(b, &ob);
    if (oa || ob || ((x == -1 || y == -1) && PyErr_Occurred())) {
        PyErr_Clear();
        return 2;
    }
    return (x > y) - (x < y);
}

/* Whether key(b) < key(a) for key(i) = (stage[i], best[i], ids[i]): 1 yes, 0 no, 2 not exact ints and strs. */
static int key_less(PyObject *cols, Py_ssize_t b, Py_ssize_t a) {
    for (int c = 0; c < 3; c++) {
        PyObject *col = PyTuple_GET_ITEM(cols, c);
        if (!PyList_CheckExact(col) || a >= PyList_GET_SIZE(col) || b >= PyList_GET_SIZE(col)) return 2;
        PyObject *x = PyList_GET_ITEM(col, b), *y = PyList_GET_ITEM(col, a);
        int r;
        if (c < 2) {
            r = cmp_small_int(x, y);
            if (r == 2) return 2;
        } else {
            if (!PyUnicode_CheckExact(x) || !PyUnicode_CheckExact(y)) return 2;
            r = PyUnicode_Compare(x, y);
            if (r == -1 && PyErr_Occurred()) {
                PyErr_Clear();
                return 2;
            }
        }
        if (r != 0) return r < 0;
    }
    return 0;
}

/* groups.union(a, b, why). Done here when the groups order their members by columns (Groups(columns=...): lists
 * of exact ints, ints and strs), which is what Groups.union does with key(i) = (stage[i], best[i], ids[i]);
 * through the method otherwise. 0 ok, -1 error. */
static int union_rows(PyObject *groups, Py_ssize_t a, Py_ssize_t b, PyObject *why) {
    PyObject *cols = PyObject_GetAttr(groups, s_columns);
    PyObject *parent = NULL, *whyd = NULL;
    int rc = 1;
    if (cols == NULL) {
        PyErr_Clear();
    } else if (PyTuple_CheckExact(cols) && PyTuple_GET_SIZE(cols) == 3) {
        parent = PyObject_GetAttr(groups, s_parent);
        whyd = parent == NULL ? NULL : PyObject_GetAttr(groups, s_why);
        if (whyd == NULL) {
            rc = -1;
        } else if (PyList_CheckExact(parent) && PyDict_CheckExact(whyd)) {
            Py_ssize_t ra = find_halving(parent, a), rb = ra < 0 ? -1 : find_halving(parent, b);
            if (ra < 0 || rb < 0) {
                rc = -1;
            } else if (ra == rb) {
                rc = 0;
            } else {
                int less = key_less(cols, rb, ra);
                if (less != 2) {
                    if (less) {
                        Py_ssize_t t = ra;
                        ra = rb;
                        rb = t;
                    }
                    PyObject *root = PyLong_FromSsize_t(ra), *lost = PyLong_FromSsize_t(rb);
                    rc = root == NULL || lost == NULL ? -1 : 0;
                    if (rc == 0) {
                        PyList_SetItem(parent, rb, root); /* steals root */
                        root = NULL;
                        rc = PyDict_SetItem(whyd, lost, why);
                    }
                    Py_XDECREF(root);
                    Py_XDECREF(lost);
                }
            }
        }
    }
    Py_XDECREF(cols);
    Py_XDECREF(parent);
    Py_XDECREF(whyd);
    if (rc != 1) return rc;
    PyObject *res = PyObject_CallMethod(groups, "union", "nnO", a, b, why);
    if (res == NULL) return -1;
    Py_DECREF(res);
    return 0;
}

/* ------------------------------------------------------------------ title_join */

/* Python's str.split() whitespace among ASCII characters: \t \n \v \f \r, \x1c-\x1f and the space. */
static const unsigned char ASCII_SPACE[128] = {
    [9] = 1, [10] = 1, [11] = 1, [12] = 1, [13] = 1, [28] = 1, [29] = 1, [30] = 1, [31] = 1, [32] = 1,
};
#define ascii_space(c) (ASCII_SPACE[(c) & 0x7f])

/* A word of a title key: its bytes, the end of the str data they lie in, and their hash (computed only for the
 * words that are looked at: a row's prefix words always, the rest when the row is compared). Words are equal when
 * their bytes are (str equality); the hash only orders them and finds candidates, equality is always checked on
 * the bytes. */
typedef struct {
    const char *p;
    Py_ssize_t len;
    uint64_t h;
    const unsigned char *end;
} Span;

/* One (domain, prefix word) key: the rows whose prefix holds it (counted per occurrence, as the Python index
 * counts them) and the rows indexed under it so far, a list of nodes in insertion order. */
typedef struct {
    uint64_t h;
    Py_ssize_t dom; /* -1: empty slot */
    Py_ssize_t span;
    Py_ssize_t count;
    Py_ssize_t head, tail;
} TKey;

typedef struct {
    Py_ssize_t h_idx; /* (hash, span) pairs, for sorting a row's words */
    uint64_t h;
} HSpan;

typedef struct {
    Py_ssize_t n;
    Span *spans;
    Py_ssize_t nspans, capspans;
    Py_ssize_t *rowbuf;  /* per row, n + 1 each: dom (-1: no domain or title), woff, stop, ulen */
    Py_ssize_t *dom, *woff, *stop, *ulen;
    Py_ssize_t *uniq;    /* per word position, compared rows only: row i's distinct words sorted by hash in
                          * uniq[woff[i] ..][:ulen[i]] */
    Py_ssize_t *pkey;    /* per word position: the key of prefix word k of row i at pkey[woff[i] + k] */
    TKey *keys;
    size_t kmask;
    Py_ssize_t *node_row, *node_next, nnodes;
    WordTable dt;        /* domains -> ids, in order of first appearance */
    PyObject **held;     /* per row: the objects whose UTF-8 buffers the spans and dt point into (key, domain) */
    Py_ssize_t nheld;
} TitleState;

static void title_state_free(TitleState *s) {
    PyMem_Free(s->spans);
    PyMem_Free(s->rowbuf);
    PyMem_Free(s->uniq);
    PyMem_Free(s->pkey);
    PyMem_Free(s->keys);
    PyMem_Free(s->node_row);
    PyMem_Free(s->node_next);
    PyMem_Free(s->dt.slots);
    if (s->held != NULL)
        for (Py_ssize_t k = 0; k < s->nheld; k++) Py_XDECREF(s->held[k]);
    PyMem_Free(s->held);
}

static int add_span(TitleState *s, const char *p, Py_ssize_t len, const unsigned char *end) {
    if (s->nspans == s->capspans) {
        Py_ssize_t cap = s->capspans ? s->capspans * 2 : 256;
        Span *spans = PyMem_Realloc(s->spans, (size_t)cap * sizeof(Span));
        if (spans == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        s->spans = spans;
        s->capspans = cap;
    }
    Span *w = &s->spans[s->nspans++];
    w->p = p;
    w->len = len;
    w->h = 0;
    w->end = end;
    return 0;
}

static void hash_spans(Span *w, Py_ssize_t count) {
    for (Py_ssize_t k = 0; k < count; k++)
        w[k].h = mix64(word_hash((const unsigned char *)w[k].p, w[k].len, w[k].end));
}

static int span_eq(const Span *a, const Span *b) {
    return a->h == b->h && a->len == b->len && memcmp(a->p, b->p, (size_t)a->len) == 0;
}

/* Hold a new reference until the call ends (its buffer is pointed into). */
static int hold(TitleState *s, PyObject *o) {
    if (s->nheld == 2 * s->n + 2) {
        Py_DECREF(o);
        PyErr_SetString(PyExc_RuntimeError, "title_join: too many held objects");
        return -1;
    }
    s->held[s->nheld++] = o;
    return 0;
}

/* Append the word p[start:stop) (none when empty) of a str whose data ends at end. */
static int add_word(TitleState *s, const unsigned char *p, Py_ssize_t start, Py_ssize_t stop, const unsigned char *end) {
    if (stop <= start) return 0;
    return add_span(s, (const char *)p + start, stop - start, end);
}

/* The words of an ASCII key (str.split()), eight bytes at a time: a byte below 0x21 is flagged (exact per byte:
 * with the high bit forced on, the subtraction borrows within the byte only); a flagged whitespace byte ends a
 * word, other control characters belong to it. 0 ok, -1 error. */
static int split_ascii(TitleState *s, const unsigned char *p, Py_ssize_t len) {
    const uint64_t high = 0x8080808080808080ULL, low = 0x2121212121212121ULL;
    Py_ssize_t start = 0, i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t x;
        memcpy(&x, p + i, 8);
        uint64_t m = ~((x | high) - low) & high;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        m = __builtin_bswap64(m);
#endif
        for (; m; m &= m - 1) {
            Py_ssize_t q = i + (__builtin_ctzll(m) >> 3);
            if (!ascii_space(p[q])) continue;
            if (add_word(s, p, start, q, p + len) < 0) return -1;
            start = q + 1;
        }
    }
    for (; i < len; i++) {
        if (p[i] > 0x20 || !ascii_space(p[i])) continue;
        if (add_word(s, p, start, i, p + len) < 0) return -1;
        start = i + 1;
    }
    return add_word(s, p, start, len, p + len);
}

/* Append the words of key (a str, a new reference the state takes) to the spans; 0 ok, -1 error, 1 not what
 * the Python version expects (a word without a UTF-8 form). */
static int split_words(TitleState *s, PyObject *key) {
    if (PyUnicode_IS_ASCII(key)) {
        if (hold(s, key) < 0) return -1;
        return split_ascii(s, (const unsigned char *)PyUnicode_DATA(key), PyUnicode_GET_LENGTH(key));
    }
    PyObject *parts = PyUnicode_Split(key, NULL, -1);
    Py_DECREF(key);
    if (parts == NULL || hold(s, parts) < 0) return -1;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(parts); k++) {
        Py_ssize_t len;
        const unsigned char *p = (const unsigned char *)PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(parts, k), &len);
        if (p == NULL) { /* e.g. a lone surrogate: leave it to the Python version */
            PyErr_Clear();
            return 1;
        }
        if (add_word(s, p, 0, len, p + len) < 0) return -1;
    }
    return 0;
}

/* Truth of a domain or title: exact strs and None without a call. 1, 0, -1 on error. */
static int truthy(PyObject *o) {
    if (PyUnicode_CheckExact(o)) return PyUnicode_GET_LENGTH(o) > 0;
    if (o == Py_None) return 0;
    return PyObject_IsTrue(o);
}

/* Pass 1a: per row, its domain id, words (spans; the prefix words hashed) and prefix length. 0 ok, -1 error, 1
 * fall back. */
static int title_rows(TitleState *s, PyObject **hits, double t, PyObject *title_key_fn) {
    Py_ssize_t n = s->n;
    PyObject *const names[3] = {s_domain, s_title, s_title_key};
    Slots sl;
    if (n > 0) slots_init(&sl, hits[0], names, 3);
    for (Py_ssize_t i = 0; i < n; i++) {
        s->woff[i] = s->nspans;
        s->dom[i] = -1;
        s->stop[i] = 0;
        PyObject *d = slot_get(&sl, hits[i], 0, s_domain);
        if (d == NULL) return -1;
        if (hold(s, d) < 0) return -1;
        int truth = truthy(d);
        if (truth <= 0) {
            if (truth < 0) return -1;
            continue;
        }
        PyObject *title = slot_get(&sl, hits[i], 1, s_title);
        if (title == NULL) return -1;
        truth = truthy(title);
        if (truth <= 0) {
            Py_DECREF(title);
            if (truth < 0) return -1;
            continue;
        }
        PyObject *key = slot_get(&sl, hits[i], 2, s_title_key);
        if (key == Py_None) {
            Py_DECREF(key);
            key = PyObject_CallOneArg(title_key_fn, title);
        }
        Py_DECREF(title);
        if (key == NULL) return -1;
        if (!PyUnicode_Check(key)) {
            Py_DECREF(key);
            return 1;
        }
        int rc = split_words(s, key);
        if (rc != 0) return rc;
        /* Domains are compared as Python compares them (str equality: the same UTF-8 bytes). */
        Py_ssize_t dom = domain_id(&s->dt, d);
        if (dom == -2) return 1;
        if (dom < 0) return -1;
        s->dom[i] = dom;
        Py_ssize_t nw = s->nspans - s->woff[i];
        /* c = n - ceil(t * n) + 1, then the slice words[:c] */
        double c = (double)nw - ceil(t * (double)nw) + 1.0;
        Py_ssize_t stop = c >= 0 ? (Py_ssize_t)c : nw + (Py_ssize_t)c;
        if (stop < 0) stop = 0;
        if (stop > nw) stop = nw;
        s->stop[i] = stop;
        hash_spans(s->spans + s->woff[i], stop);
    }
    s->woff[n] = s->nspans;
    return 0;
}

static int cmp_hspan(const void *x, const void *y) {
    uint64_t a = ((const HSpan *)x)->h, b = ((const HSpan *)y)->h;
    return (a > b) - (a < b);
}

/* Pass 1b: each row's prefix keys (domain, prefix word), counted. 0 ok, -1 error. */
static int title_keys(TitleState *s) {
    Py_ssize_t n = s->n, m = s->nspans, nprefix = 0;
    for (Py_ssize_t i = 0; i < n; i++) nprefix += s->stop[i];
    size_t cap = 16;
    while (cap < (size_t)nprefix * 2) cap <<= 1;
    s->pkey = PyMem_Malloc((size_t)(m ? m : 1) * sizeof(Py_ssize_t));
    s->keys = PyMem_Malloc(cap * sizeof(TKey));
    s->node_row = PyMem_Malloc((size_t)(nprefix ? nprefix : 1) * sizeof(Py_ssize_t));
    s->node_next = PyMem_Malloc((size_t)(nprefix ? nprefix : 1) * sizeof(Py_ssize_t));
    if (s->pkey == NULL || s->keys == NULL || s->node_row == NULL || s->node_next == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    s->kmask = cap - 1;
    for (size_t k = 0; k < cap; k++) s->keys[k].dom = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s->dom[i] < 0) continue;
        for (Py_ssize_t k = 0; k < s->stop[i]; k++) {
            Py_ssize_t sp = s->woff[i] + k;
            uint64_t h = mix64(s->spans[sp].h ^ ((uint64_t)s->dom[i] * 0x9e3779b97f4a7c15ULL));
            size_t at = (size_t)h & s->kmask;
            for (;;) {
                TKey *key = &s->keys[at];
                if (key->dom < 0) {
                    key->h = h;
                    key->dom = s->dom[i];
                    key->span = sp;
                    key->count = 0;
                    key->head = key->tail = -1;
                }
                if (key->h == h && key->dom == s->dom[i] && span_eq(&s->spans[key->span], &s->spans[sp])) {
                    key->count++;
                    s->pkey[sp] = (Py_ssize_t)at;
                    break;
                }
                at = (at + 1) & s->kmask;
            }
        }
    }
    return 0;
}

/* Pass 1c, for the rows that will be compared (picked[0:npicked]): the rest of their words hashed, and their
 * distinct words sorted by hash (the frozenset the Python join compares). Run before any union, so a fall-back
 * leaves the groups as they were. 0 ok, -1 error, 1 fall back (two different words with one hash). */
static int title_sets(TitleState *s, const Py_ssize_t *picked, Py_ssize_t npicked) {
    HSpan small[32], *buf = small;
    s->uniq = PyMem_Malloc((size_t)(s->nspans ? s->nspans : 1) * sizeof(Py_ssize_t));
    if (s->uniq == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int rc = 0;
    for (Py_ssize_t p = 0; p < npicked && rc == 0; p++) {
        Py_ssize_t i = picked[p], from = s->woff[i], len = s->woff[i + 1] - from;
        hash_spans(s->spans + from + s->stop[i], len - s->stop[i]);
        if (len > 32 && buf == small) {
            Py_ssize_t most = 0;
            for (Py_ssize_t r = 0; r < s->n; r++) most = Py_MAX(most, s->woff[r + 1] - s->woff[r]);
            buf = PyMem_Malloc((size_t)most * sizeof(HSpan));
            if (buf == NULL) {
                PyErr_NoMemory();
                return -1;
            }
        }
        for (Py_ssize_t k = 0; k < len; k++) {
            buf[k].h_idx = from + k;
            buf[k].h = s->spans[from + k].h;
        }
        if (len > 32) {
            qsort(buf, (size_t)len, sizeof(HSpan), cmp_hspan);
        } else {
            for (Py_ssize_t a = 1; a < len; a++) {
                HSpan x = buf[a];
                Py_ssize_t b = a;
                while (b > 0 && buf[b - 1].h > x.h) {
                    buf[b] = buf[b - 1];
                    b--;
                }
                buf[b] = x;
            }
        }
        Py_ssize_t w = 0;
        for (Py_ssize_t k = 0; k < len; k++) {
            if (w > 0 && buf[k].h == s->spans[s->uniq[from + w - 1]].h) {
                if (span_eq(&s->spans[buf[k].h_idx], &s->spans[s->uniq[from + w - 1]])) continue;
                rc = 1; /* a hash collision between different words */
                break;
            }
            s->uniq[from + w++] = buf[k].h_idx;
        }
        s->ulen[i] = w;
    }
    if (buf != small) PyMem_Free(buf);
    return rc;
}

/* |words(i) & words(j)| over the rows' distinct words sorted by hash (equal hashes: the bytes decide). */
static Py_ssize_t row_intersect(const TitleState *s, Py_ssize_t i, Py_ssize_t j) {
    const Py_ssize_t *a = s->uniq + s->woff[i], *b = s->uniq + s->woff[j];
    Py_ssize_t na = s->ulen[i], nb = s->ulen[j], x = 0, y = 0, c = 0;
    while (x < na && y < nb) {
        const Span *sa = &s->spans[a[x]], *sb = &s->spans[b[y]];
        if (sa->h < sb->h) {
            x++;
        } else if (sa->h > sb->h) {
            y++;
        } else {
            c += sa->len == sb->len && memcmp(sa->p, sb->p, (size_t)sa->len) == 0;
            x++;
            y++;
        }
    }
    return c;
}

/* Pass 2: the sequential prefix join over the rows that share a (domain, prefix word): the comparisons made, -1
 * on error, -2 to fall back (before any union). */
static Py_ssize_t title_probe(TitleState *s, double t, PyObject *groups, PyObject *parent) {
    Py_ssize_t n = s->n, npicked = 0, comparisons = 0, most = 1;
    for (Py_ssize_t i = 0; i < n; i++) most = Py_MAX(most, s->stop[i]);
    Py_ssize_t *work = PyMem_Malloc((size_t)(3 * n + s->dt.count + 2 + most) * sizeof(Py_ssize_t));
    if (work == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t *picked = work, *order = work + n, *seen = work + 2 * n, *byDom = work + 3 * n;
    Py_ssize_t *probes = byDom + s->dt.count + 1;
    memset(seen, 0, (size_t)n * sizeof(Py_ssize_t));
    memset(byDom, 0, (size_t)(s->dt.count + 1) * sizeof(Py_ssize_t));
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s->dom[i] < 0) continue;
        for (Py_ssize_t k = 0; k < s->stop[i]; k++)
            if (s->keys[s->pkey[s->woff[i] + k]].count > 1) {
                picked[npicked++] = i;
                break;
            }
    }
    int sets = title_sets(s, picked, npicked);
    if (sets != 0) {
        PyMem_Free(work);
        return sets < 0 ? -1 : -2;
    }
    /* By (domain's first row, row): domain ids follow first appearance, rows were picked in order. */
    for (Py_ssize_t p = 0; p < npicked; p++) byDom[s->dom[picked[p]] + 1]++;
    for (Py_ssize_t d = 0; d < s->dt.count; d++) byDom[d + 1] += byDom[d];
    for (Py_ssize_t p = 0; p < npicked; p++) order[byDom[s->dom[picked[p]]]++] = picked[p];
    for (Py_ssize_t p = 0; p < npicked; p++) {
        Py_ssize_t i = order[p], nprobes = 0;
        for (Py_ssize_t k = 0; k < s->stop[i]; k++) {
            Py_ssize_t key = s->pkey[s->woff[i] + k];
            if (s->keys[key].count > 1) probes[nprobes++] = key;
        }
        int merged = 0;
        for (Py_ssize_t q = 0; q < nprobes; q++) {
            for (Py_ssize_t node = s->keys[probes[q]].head; node >= 0; node = s->node_next[node]) {
                Py_ssize_t j = s->node_row[node];
                if (seen[j] == p + 1) continue;
                Py_ssize_t rj = find_halving(parent, j), ri = rj < 0 ? -1 : find_halving(parent, i);
                if (rj < 0 || ri < 0) goto fail;
                if (rj == ri) continue;
                seen[j] = p + 1;
                comparisons++;
                Py_ssize_t inter = row_intersect(s, i, j);
                if ((double)inter >= t * (double)(s->ulen[i] + s->ulen[j] - inter)) {
                    if (union_rows(groups, i, j, s_why_title) < 0) goto fail;
                    merged = 1;
                }
            }
        }
        if (!merged)
            for (Py_ssize_t q = 0; q < nprobes; q++) {
                TKey *key = &s->keys[probes[q]];
                Py_ssize_t node = s->nnodes++;
                s->node_row[node] = i;
                s->node_next[node] = -1;
                if (key->tail >= 0) s->node_next[key->tail] = node;
                else key->head = node;
                key->tail = node;
            }
    }
    PyMem_Free(work);
    return comparisons;
fail:
    PyMem_Free(work);
    return -1;
}

/* title_join(hits, t, groups, title_key) -> comparisons, or None (nothing united: the Python join decides).
 * fusion.dedup._title_join_py: rows with a domain and a title, their title keys' words (title_key(title) where
 * the key is missing), the sequential prefix join blocked by domain. */
static PyObject *title_join(PyObject *self, PyObject *args) {
    PyObject *hits_in, *groups, *title_key_fn;
    double t;
    if (!PyArg_ParseTuple(args, "OdOO:title_join", &hits_in, &t, &groups, &title_key_fn)) return NULL;
    PyObject *seq = PySequence_Fast(hits_in, "hits must be a sequence");
    if (seq == NULL) return NULL;
    PyObject *parent = PyObject_GetAttr(groups, s_parent);
    if (parent == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    PyObject *result = NULL;
    TitleState s;
    memset(&s, 0, sizeof s);
    if (!PyList_Check(parent)) {
        PyErr_SetString(PyExc_TypeError, "groups.parent must be a list");
        goto done;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    s.n = n;
    s.rowbuf = PyMem_Malloc((size_t)(4 * (n + 1)) * sizeof(Py_ssize_t));
    s.held = PyMem_Malloc((size_t)(2 * n + 2) * sizeof(PyObject *));
    s.capspans = n * 8 + 8;
    s.spans = PyMem_Malloc((size_t)s.capspans * sizeof(Span));
    if (s.rowbuf == NULL || s.held == NULL || s.spans == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    s.dom = s.rowbuf;
    s.woff = s.rowbuf + (n + 1);
    s.stop = s.rowbuf + 2 * (n + 1);
    s.ulen = s.rowbuf + 3 * (n + 1);
    if (words_init(&s.dt, 16) < 0) goto done;
    int rc = title_rows(&s, PySequence_Fast_ITEMS(seq), t, title_key_fn);
    if (rc == 0) rc = title_keys(&s);
    if (rc < 0) goto done;
    if (rc > 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    int shared = 0;
    for (size_t k = 0; k <= s.kmask && !shared; k++) shared = s.keys[k].dom >= 0 && s.keys[k].count > 1;
    if (!shared) {
        result = PyLong_FromLong(0);
        goto done;
    }
    Py_ssize_t comparisons = title_probe(&s, t, groups, parent);
    if (comparisons == -2) result = Py_NewRef(Py_None);
    else if (comparisons >= 0) result = PyLong_FromSsize_t(comparisons);
done:
    title_state_free(&s);
    Py_DECREF(parent);
    Py_DECREF(seq);
    return result;
}

/* ------------------------------------------------------------------ close signature pairs */

/* Every pair (i < j, row-major) of v[0:n] within max_bits differing bits, flattened into out while cap allows;
 * returns the number of entries the pairs need (2 per pair). One body, compiled twice: with the hardware popcount
 * where the CPU has it (chosen at run time), and without. */
#define PAIRS_BODY                                                          \
    Py_ssize_t m = 0;                                                       \
    for (Py_ssize_t i = 0; i < n; i++)                                      \
        for (Py_ssize_t j = i + 1; j < n; j++)                              \
            if (__builtin_popcountll(v[i] ^ v[j]) <= max_bits) {            \
                if (m + 2 <= cap) {                                         \
                    out[m] = i;                                             \
                    out[m + 1] = j;                                         \
                }                                                           \
                m += 2;                                                     \
            }                                                               \
    return m;

static Py_ssize_t pairs_generic(const uint64_t *v, Py_ssize_t n, int max_bits, Py_ssize_t *out, Py_ssize_t cap) {
    PAIRS_BODY
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("popcnt"))) static Py_ssize_t pairs_popcnt(const uint64_t *v, Py_ssize_t n, int max_bits,
                                                                  Py_ssize_t *out, Py_ssize_t cap) {
    PAIRS_BODY
}
#endif

static Py_ssize_t find_pairs(const uint64_t *v, Py_ssize_t n, int max_bits, Py_ssize_t *out, Py_ssize_t cap) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("popcnt")) return pairs_popcnt(v, n, max_bits, out, cap);
#endif
    return pairs_generic(v, n, max_bits, out, cap);
}

/* The close pairs of v[0:n] (see find_pairs) in a new buffer of *count entries; NULL with MemoryError. */
static Py_ssize_t *close_pairs(const uint64_t *v, Py_ssize_t n, int max_bits, Py_ssize_t *count) {
    Py_ssize_t room = 256;
    Py_ssize_t *out = PyMem_Malloc((size_t)room * sizeof(Py_ssize_t));
    if (out != NULL) {
        *count = find_pairs(v, n, max_bits, out, room);
        if (*count > room) { /* more pairs than room: size the buffer and search again */
            PyMem_Free(out);
            out = PyMem_Malloc((size_t)*count * sizeof(Py_ssize_t));
            if (out != NULL) find_pairs(v, n, max_bits, out, *count);
        }
    }
    if (out == NULL) PyErr_NoMemory();
    return out;
}

/* ------------------------------------------------------------------ collect_rows */

/* collect_rows(lanes, lane_stages) -> (ids, reps, stages, best, rows, native): the candidate table of
 * fusion.combine.collect. lanes: per usable lane (sorted by name), its hits best first; lane_stages: 0 or 1 per
 * lane. A repeat inside a lane counts once, at its first position (the ranks after it close up); the same id
 * across lanes is one row whose representative is its occurrence ahead by (stage, rank), the first lane winning
 * a tie; best is the best rank over the row's lanes. rows[l] / native[l]: per lane, the row and the hit's score
 * at each (closed-up) rank. */
static PyObject *collect_rows(PyObject *self, PyObject *args) {
    PyObject *lanes_in, *stages_in;
    if (!PyArg_ParseTuple(args, "OO:collect_rows", &lanes_in, &stages_in)) return NULL;
    PyObject *lanes = PySequence_Fast(lanes_in, "lanes must be a sequence");
    if (lanes == NULL) return NULL;
    PyObject *result = NULL, *ids = NULL, *rows_out = NULL, *native_out = NULL;
    WordTable pos = {NULL, 0, 0};
    Py_ssize_t nl = PySequence_Fast_GET_SIZE(lanes), total = 0, nrows = 0;
    PyObject **lane_seqs = PyMem_Calloc((size_t)(nl ? nl : 1), sizeof(PyObject *));
    PyObject **reps = NULL;
    Py_ssize_t *mark = NULL, *best = NULL, *stage = NULL;
    PyObject *const names[2] = {s_id, s_score};
    Slots sl;
    int have_slots = 0;
    if (lane_seqs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (!PySequence_Check(stages_in) || PySequence_Size(stages_in) != nl) {
        PyErr_SetString(PyExc_ValueError, "one stage per lane");
        goto done;
    }
    for (Py_ssize_t l = 0; l < nl; l++) {
        lane_seqs[l] = PySequence_Fast(PySequence_Fast_GET_ITEM(lanes, l), "a lane's hits must be a sequence");
        if (lane_seqs[l] == NULL) goto done;
        total += PySequence_Fast_GET_SIZE(lane_seqs[l]);
    }
    size_t cap = (size_t)(total ? total : 1);
    reps = PyMem_Malloc(cap * sizeof(PyObject *));
    mark = PyMem_Malloc(cap * sizeof(Py_ssize_t));
    best = PyMem_Malloc(cap * sizeof(Py_ssize_t));
    stage = PyMem_Malloc(cap * sizeof(Py_ssize_t));
    ids = PyList_New(0);
    rows_out = PyList_New(nl);
    native_out = PyList_New(nl);
    if (reps == NULL || mark == NULL || best == NULL || stage == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (ids == NULL || rows_out == NULL || native_out == NULL || words_init(&pos, cap) < 0) goto done;
    for (Py_ssize_t l = 0; l < nl; l++) {
        PyObject *st = PySequence_GetItem(stages_in, l);
        if (st == NULL) goto done;
        Py_ssize_t lane_stage = PyLong_AsSsize_t(st);
        Py_DECREF(st);
        if (lane_stage == -1 && PyErr_Occurred()) goto done;
        Py_ssize_t nh = PySequence_Fast_GET_SIZE(lane_seqs[l]), kept = 0;
        PyObject **hits = PySequence_Fast_ITEMS(lane_seqs[l]);
        PyObject *rows = PyList_New(nh), *native = PyList_New(nh);
        if (rows == NULL || native == NULL) {
            Py_XDECREF(rows);
            Py_XDECREF(native);
            goto done;
        }
        PyList_SET_ITEM(rows_out, l, rows);
        PyList_SET_ITEM(native_out, l, native);
        if (nh > 0 && !have_slots) {
            slots_init(&sl, hits[0], names, 2);
            have_slots = 1;
        }
        for (Py_ssize_t p = 0; p < nh; p++) {
            PyObject *h = hits[p];
            PyObject *id = slot_get(&sl, h, 0, s_id);
            if (id == NULL) goto done;
            /* ids are interned by their bytes: a new id gets the next word id, which is its row */
            Py_ssize_t row = str_id(&pos, id);
            if (row < 0) {
                Py_DECREF(id);
                if (row == -2) result = Py_NewRef(Py_None); /* an id that is not a str: the Python version */
                goto done;
            }
            if (row == nrows) {
                nrows++;
                if (PyList_Append(ids, id) < 0) { /* ids keeps the first occurrence (the table points into it) */
                    Py_DECREF(id);
                    goto done;
                }
                Py_DECREF(id);
                reps[row] = h;
                stage[row] = lane_stage;
                best[row] = kept + 1;
            } else {
                Py_DECREF(id);
                if (mark[row] == l) continue; /* a repeat inside this lane */
                Py_ssize_t rank = kept + 1;
                if (lane_stage < stage[row] || (lane_stage == stage[row] && rank < best[row])) {
                    reps[row] = h;
                    stage[row] = lane_stage;
                }
                if (rank < best[row]) best[row] = rank;
            }
            mark[row] = l;
            PyObject *score = slot_get(&sl, h, 1, s_score);
            PyObject *r = score == NULL ? NULL : PyLong_FromSsize_t(row);
            if (r == NULL) {
                Py_XDECREF(score);
                goto done;
            }
            PyList_SET_ITEM(rows, kept, r);
            PyList_SET_ITEM(native, kept, score);
            kept++;
        }
        /* close up after in-lane repeats: the unused tail slots are still NULL */
        if (kept < nh && (PyList_SetSlice(rows, kept, nh, NULL) < 0 || PyList_SetSlice(native, kept, nh, NULL) < 0))
            goto done;
    }
    {
        PyObject *reps_out = PyList_New(nrows), *stage_out = PyList_New(nrows), *best_out = PyList_New(nrows);
        if (reps_out == NULL || stage_out == NULL || best_out == NULL) {
            Py_XDECREF(reps_out);
            Py_XDECREF(stage_out);
            Py_XDECREF(best_out);
            goto done;
        }
        for (Py_ssize_t r = 0; r < nrows; r++) {
            PyList_SET_ITEM(reps_out, r, Py_NewRef(reps[r]));
            PyObject *a = PyLong_FromSsize_t(stage[r]), *b = PyLong_FromSsize_t(best[r]);
            if (a == NULL || b == NULL) {
                Py_XDECREF(a);
                Py_XDECREF(b);
                Py_DECREF(reps_out);
                Py_DECREF(stage_out);
                Py_DECREF(best_out);
                goto done;
            }
            PyList_SET_ITEM(stage_out, r, a);
            PyList_SET_ITEM(best_out, r, b);
        }
        result = Py_BuildValue("(OOOOOO)", ids, reps_out, stage_out, best_out, rows_out, native_out);
        Py_DECREF(reps_out);
        Py_DECREF(stage_out);
        Py_DECREF(best_out);
    }
done:
    if (lane_seqs != NULL) {
        for (Py_ssize_t l = 0; l < nl; l++) Py_XDECREF(lane_seqs[l]);
        PyMem_Free(lane_seqs);
    }
    PyMem_Free(reps);
    PyMem_Free(mark);
    PyMem_Free(best);
    PyMem_Free(stage);
    PyMem_Free(pos.slots);
    Py_XDECREF(ids);
    Py_XDECREF(rows_out);
    Py_XDECREF(native_out);
    Py_DECREF(lanes);
    return result;
}


/* ------------------------------------------------------------------ build_items */

static PyObject *s_rrf, *s_fused, *neg_inf;

/* build_items(rows, lane_rows, lane_names, components, native, rrf, base, total, stage, hits, factors, lane_order,
 * merged, item_type) -> list of items, or None when item_type's fields are not plain slots (the caller builds them
 * in Python). The items of fusion.types.FusedItems._build: per lane (index order) the row's rank; per lane (index
 * order, or for a merged row the order the lanes joined it) the lane's native score as its component when higher
 * than the one so far; scores in the order rrf, components, factors, fused; merged_ids sorted. */
static PyObject *build_items(PyObject *self, PyObject *args) {
    PyObject *rows_in, *lane_rows_in, *lane_names, *components, *native_in, *rrf, *base, *total, *stage, *hits,
        *factors_in, *lane_order, *merged;
    PyTypeObject *item_type;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOO!O!O!:build_items", &rows_in, &lane_rows_in, &lane_names, &components,
                          &native_in, &rrf, &base, &total, &stage, &hits, &factors_in, &PyDict_Type, &lane_order,
                          &PyDict_Type, &merged, &PyType_Type, &item_type))
        return NULL;
    PyObject *const fields[7] = {s_f_hit, s_f_total, s_f_scores, s_f_lanes, s_f_ranks, s_f_stage, s_f_merged};
    Slots sl;
    slots_init_type(&sl, item_type, fields, 7);
    if (sl.type == NULL) Py_RETURN_NONE;
    for (int k = 0; k < 7; k++)
        if (sl.off[k] < 0) Py_RETURN_NONE;
    if (!PyList_Check(rrf) || !PyList_Check(base) || !PyList_Check(total) || !PyList_Check(stage) ||
        !PyList_Check(hits) || !PyTuple_Check(lane_names) || !PyTuple_Check(components)) {
        PyErr_SetString(PyExc_TypeError, "build_items: columns must be lists, lane names and components tuples");
        return NULL;
    }
    PyObject *rows = PySequence_Fast(rows_in, "rows must be a sequence");
    PyObject *lane_rows = rows == NULL ? NULL : PySequence_Fast(lane_rows_in, "lane rows must be a sequence");
    PyObject *native = lane_rows == NULL ? NULL : PySequence_Fast(native_in, "native must be a sequence");
    PyObject *factors = native == NULL ? NULL : PySequence_Fast(factors_in, "factors must be a sequence");
    PyObject *result = NULL;
    Py_ssize_t nl = lane_rows == NULL ? 0 : PySequence_Fast_GET_SIZE(lane_rows), n = PyList_GET_SIZE(hits);
    Py_ssize_t *rank_of = NULL; /* rank_of[l * n + row]: 1-based rank of row in lane l, 0 if absent */
    if (factors == NULL) goto done;
    if (PyTuple_GET_SIZE(lane_names) != nl || PyTuple_GET_SIZE(components) != nl ||
        PySequence_Fast_GET_SIZE(native) != nl || PyList_GET_SIZE(rrf) != n || PyList_GET_SIZE(base) != n ||
        PyList_GET_SIZE(total) != n || PyList_GET_SIZE(stage) != n) {
        PyErr_SetString(PyExc_ValueError, "build_items: columns of different lengths");
        goto done;
    }
    size_t cells = (size_t)nl * (size_t)n;
    rank_of = PyMem_Calloc(cells ? cells : 1, sizeof(Py_ssize_t));
    if (rank_of == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t l = 0; l < nl; l++) {
        PyObject *lr = PySequence_Fast_GET_ITEM(lane_rows, l);
        PyObject *nat = PySequence_Fast_GET_ITEM(native, l);
        if (!PyList_Check(lr) || !PyList_Check(nat) || PyList_GET_SIZE(nat) < PyList_GET_SIZE(lr)) {
            PyErr_SetString(PyExc_TypeError, "build_items: a lane's rows and scores must be lists of one length");
            goto done;
        }
        for (Py_ssize_t r = 0; r < PyList_GET_SIZE(lr); r++) { /* a later occurrence wins, as in dict(zip(...)) */
            Py_ssize_t row = PyLong_AsSsize_t(PyList_GET_ITEM(lr, r));
            if (row == -1 && PyErr_Occurred()) goto done;
            if (row < 0 || row >= n) {
                PyErr_SetString(PyExc_IndexError, "build_items: lane row out of range");
                goto done;
            }
            rank_of[l * n + row] = r + 1;
        }
    }
    Py_ssize_t nf = PySequence_Fast_GET_SIZE(factors);
    for (Py_ssize_t f = 0; f < nf; f++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(factors, f);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyList_Check(PyTuple_GET_ITEM(pair, 1)) ||
            PyList_GET_SIZE(PyTuple_GET_ITEM(pair, 1)) != n) {
            PyErr_SetString(PyExc_TypeError, "build_items: factors must be (name, column) pairs");
            goto done;
        }
    }
    Py_ssize_t m = PySequence_Fast_GET_SIZE(rows);
    result = PyList_New(m);
    if (result == NULL) goto done;
    for (Py_ssize_t k = 0; k < m; k++) {
        Py_ssize_t row = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(rows, k));
        if (row == -1 && PyErr_Occurred()) goto fail;
        if (row < 0 || row >= n) {
            PyErr_SetString(PyExc_IndexError, "build_items: row out of range");
            goto fail;
        }
        PyObject *scores = PyDict_New(), *ranks = PyDict_New(), *key = NULL, *joined, *merged_ids = NULL;
        PyObject *item = NULL;
        if (scores == NULL || ranks == NULL || PyDict_SetItem(scores, s_rrf, PyList_GET_ITEM(rrf, row)) < 0)
            goto item_fail;
        for (Py_ssize_t l = 0; l < nl; l++) {
            Py_ssize_t r = rank_of[l * n + row];
            if (r == 0) continue;
            PyObject *rank = PyLong_FromSsize_t(r);
            int rc = rank == NULL ? -1 : PyDict_SetItem(ranks, PyTuple_GET_ITEM(lane_names, l), rank);
            Py_XDECREF(rank);
            if (rc < 0) goto item_fail;
        }
        /* Components: lanes in index order, or for a merged row in the order they joined it. */
        key = PyLong_FromSsize_t(row);
        if (key == NULL) goto item_fail;
        joined = PyDict_GetItemWithError(lane_order, key);
        if (joined == NULL && PyErr_Occurred()) goto item_fail;
        Py_ssize_t nj = nl;
        if (joined != NULL) {
            if (!PyList_Check(joined)) {
                PyErr_SetString(PyExc_TypeError, "build_items: a lane order must be a list");
                goto item_fail;
            }
            nj = PyList_GET_SIZE(joined);
        }
        for (Py_ssize_t q = 0; q < nj; q++) {
            Py_ssize_t l = q;
            if (joined != NULL) {
                l = PyLong_AsSsize_t(PyList_GET_ITEM(joined, q));
                if (l == -1 && PyErr_Occurred()) goto item_fail;
                if (l < 0 || l >= nl) {
                    PyErr_SetString(PyExc_IndexError, "build_items: lane out of range");
                    goto item_fail;
                }
            }
            Py_ssize_t r = rank_of[l * n + row];
            PyObject *comp = PyTuple_GET_ITEM(components, l);
            if (r == 0 || comp == Py_None) continue;
            PyObject *value = PyList_GET_ITEM(PySequence_Fast_GET_ITEM(native, l), r - 1);
            PyObject *now = PyDict_GetItemWithError(scores, comp);
            if (now == NULL && PyErr_Occurred()) goto item_fail;
            int gt = PyObject_RichCompareBool(value, now != NULL ? now : neg_inf, Py_GT);
            if (gt < 0 || (gt && PyDict_SetItem(scores, comp, value) < 0)) goto item_fail;
        }
        /* merged_ids: the merged duplicates' ids, sorted */
        PyObject *ids = PyDict_GetItemWithError(merged, key);
        if (ids == NULL && PyErr_Occurred()) goto item_fail;
        if (ids != NULL) {
            PyObject *sorted_ids = PySequence_List(ids);
            if (sorted_ids == NULL) goto item_fail;
            if (PyList_Sort(sorted_ids) < 0) {
                Py_DECREF(sorted_ids);
                goto item_fail;
            }
            merged_ids = PyList_AsTuple(sorted_ids);
            Py_DECREF(sorted_ids);
        } else {
            merged_ids = PyTuple_New(0);
        }
        if (merged_ids == NULL) goto item_fail;
        for (Py_ssize_t f = 0; f < nf; f++) {
            PyObject *pair = PySequence_Fast_GET_ITEM(factors, f);
            if (PyDict_SetItem(scores, PyTuple_GET_ITEM(pair, 0), PyList_GET_ITEM(PyTuple_GET_ITEM(pair, 1), row)) < 0)
                goto item_fail;
        }
        if (PyDict_SetItem(scores, s_fused, PyList_GET_ITEM(base, row)) < 0) goto item_fail;
        PyObject *lanes = PyDict_Size(ranks) ? PySequence_Tuple(ranks) : PyTuple_New(0);
        if (lanes == NULL) goto item_fail;
        item = item_type->tp_alloc(item_type, 0);
        if (item == NULL) {
            Py_DECREF(lanes);
            goto item_fail;
        }
        PyObject *values[7] = {PyList_GET_ITEM(hits, row), PyList_GET_ITEM(total, row), scores, lanes, ranks,
                               PyList_GET_ITEM(stage, row), merged_ids};
        for (int f = 0; f < 7; f++) {
            PyObject **slot = (PyObject **)((char *)item + sl.off[f]);
            PyObject *old = *slot;
            *slot = f == 3 || f == 6 ? values[f] : Py_NewRef(values[f]); /* lanes and merged_ids: new refs */
            Py_XDECREF(old);
        }
        Py_DECREF(scores);
        Py_DECREF(ranks);
        Py_DECREF(key);
        PyList_SET_ITEM(result, k, item);
        continue;
    item_fail:
        Py_XDECREF(scores);
        Py_XDECREF(ranks);
        Py_XDECREF(key);
        Py_XDECREF(merged_ids);
        goto fail;
    }
    goto done;
fail:
    Py_CLEAR(result);
done:
    PyMem_Free(rank_of);
    Py_XDECREF(rows);
    Py_XDECREF(lane_rows);
    Py_XDECREF(native);
    Py_XDECREF(factors);
    return result;
}


/* ------------------------------------------------------------------ merge_rows */

static int as_ssize_array(PyObject *list, Py_ssize_t *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = PyLong_AsSsize_t(PyList_GET_ITEM(list, i));
        if (out[i] == -1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

/* A new list of Python numbers made from a C array: ssize_list (ints) and double_list (floats). */
#define LIST_OF(name, type, make)                                            \
    static PyObject *name(const type *v, Py_ssize_t n) {                     \
        PyObject *list = PyList_New(n);                                      \
        for (Py_ssize_t i = 0; list != NULL && i < n; i++) {                 \
            PyObject *x = make(v[i]);                                        \
            if (x == NULL) Py_CLEAR(list);                                   \
            else PyList_SET_ITEM(list, i, x);                                \
        }                                                                    \
        return list;                                                         \
    }

LIST_OF(ssize_list, Py_ssize_t, PyLong_FromSsize_t)
LIST_OF(double_list, double, PyFloat_FromDouble)

/* merge_rows(rows, native, norm, ids, hits, stage, best, root, members)
 *   -> (ids, hits, stage, best, merged, lane_order, rows, native, norm)
 * fusion.dedup._merge: fold each member row into its root, one by one in row order (the root's lanes first, then
 * the member's new ones; merged ids in member order; the smaller stage and best rank), drop the members and
 * renumber; in a lane that held copies, the first occurrence keeps its place and native score, the ranks after
 * it close up, the normalised score is the best of the copies', and best ranks move up where ranks closed up.
 * Lanes without copies keep their score lists (the same objects). */
static PyObject *merge_rows(PyObject *self, PyObject *args) {
    PyObject *rows_in, *native_in, *norm_in, *ids, *hits, *stage_in, *best_in, *root_in, *members_in;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!O!O!O!:merge_rows", &PyList_Type, &rows_in, &PyList_Type, &native_in,
                          &PyList_Type, &norm_in, &PyList_Type, &ids, &PyList_Type, &hits, &PyList_Type, &stage_in,
                          &PyList_Type, &best_in, &PyList_Type, &root_in, &PyList_Type, &members_in))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(ids), nl = PyList_GET_SIZE(rows_in), nm = PyList_GET_SIZE(members_in);
    if (PyList_GET_SIZE(hits) != n || PyList_GET_SIZE(stage_in) != n || PyList_GET_SIZE(best_in) != n ||
        PyList_GET_SIZE(root_in) != n || PyList_GET_SIZE(native_in) != nl || PyList_GET_SIZE(norm_in) != nl) {
        PyErr_SetString(PyExc_ValueError, "merge_rows: columns of different lengths");
        return NULL;
    }
    size_t cells = (size_t)(nl ? nl : 1) * (size_t)(n ? n : 1);
    Py_ssize_t *stage = PyMem_Malloc((size_t)(n + 1) * sizeof(Py_ssize_t));
    Py_ssize_t *best = PyMem_Malloc((size_t)(n + 1) * sizeof(Py_ssize_t));
    Py_ssize_t *root = PyMem_Malloc((size_t)(n + 1) * sizeof(Py_ssize_t));
    Py_ssize_t *members = PyMem_Malloc((size_t)(nm + 1) * sizeof(Py_ssize_t));
    Py_ssize_t *to = PyMem_Malloc((size_t)(n + 1) * sizeof(Py_ssize_t));
    Py_ssize_t *nbest = PyMem_Malloc((size_t)(n + 1) * sizeof(Py_ssize_t));
    Py_ssize_t *at = PyMem_Malloc((size_t)(n + 1) * sizeof(Py_ssize_t));
    char *gone = PyMem_Calloc((size_t)(n + 1), 1), *touched = PyMem_Calloc((size_t)(n + 1), 1);
    char *held = PyMem_Calloc(cells, 1); /* held[l * n + row]: lane l holds touched row */
    Py_ssize_t *loff = PyMem_Malloc((size_t)(nl + 1) * sizeof(Py_ssize_t)), *lrow = NULL; /* lane l's rows */
    PyObject *orders = PyDict_New(), *merged = PyDict_New(), *result = NULL;
    PyObject *o_ids = NULL, *o_hits = NULL, *o_stage = NULL, *o_best = NULL, *o_merged = NULL, *o_order = NULL;
    PyObject *o_rows = NULL, *o_native = NULL, *o_norm = NULL;
    if (!stage || !best || !root || !members || !to || !nbest || !at || !gone || !touched || !held || !loff) {
        PyErr_NoMemory();
        goto done;
    }
    if (orders == NULL || merged == NULL) goto done;
    if (as_ssize_array(stage_in, stage, n) < 0 || as_ssize_array(best_in, best, n) < 0 ||
        as_ssize_array(root_in, root, n) < 0 || as_ssize_array(members_in, members, nm) < 0)
        goto done;
    for (Py_ssize_t k = 0; k < nm; k++) {
        Py_ssize_t i = members[k];
        if (i < 0 || i >= n || root[i] < 0 || root[i] >= n) {
            PyErr_SetString(PyExc_IndexError, "merge_rows: row out of range");
            goto done;
        }
        touched[i] = touched[root[i]] = 1;
        gone[i] = 1;
    }
    loff[0] = 0;
    for (Py_ssize_t l = 0; l < nl; l++) {
        PyObject *rows = PyList_GET_ITEM(rows_in, l);
        if (!PyList_Check(rows)) {
            PyErr_SetString(PyExc_TypeError, "merge_rows: a lane's rows must be a list");
            goto done;
        }
        loff[l + 1] = loff[l] + PyList_GET_SIZE(rows);
    }
    lrow = PyMem_Malloc((size_t)(loff[nl] ? loff[nl] : 1) * sizeof(Py_ssize_t));
    if (lrow == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t l = 0; l < nl; l++) {
        Py_ssize_t *lr = lrow + loff[l];
        if (as_ssize_array(PyList_GET_ITEM(rows_in, l), lr, loff[l + 1] - loff[l]) < 0) goto done;
        for (Py_ssize_t r = 0; r < loff[l + 1] - loff[l]; r++) {
            Py_ssize_t j = lr[r];
            if (j < 0 || j >= n) {
                PyErr_SetString(PyExc_IndexError, "merge_rows: lane row out of range");
                goto done;
            }
            if (touched[j]) held[l * n + j] = 1;
        }
    }
    /* fold members into roots, in row order */
    for (Py_ssize_t k = 0; k < nm; k++) {
        Py_ssize_t i = members[k], r = root[i];
        PyObject *rkey = PyLong_FromSsize_t(r);
        if (rkey == NULL) goto done;
        PyObject *order = PyDict_GetItemWithError(orders, rkey);
        if (order == NULL) {
            if (PyErr_Occurred() || (order = PyList_New(0)) == NULL || PyDict_SetItem(orders, rkey, order) < 0) {
                Py_XDECREF(order);
                Py_DECREF(rkey);
                goto done;
            }
            Py_DECREF(order); /* the dict holds it */
            for (Py_ssize_t l = 0; l < nl; l++) {
                if (!held[l * n + r]) continue;
                PyObject *x = PyLong_FromSsize_t(l);
                if (x == NULL || PyList_Append(order, x) < 0) {
                    Py_XDECREF(x);
                    Py_DECREF(rkey);
                    goto done;
                }
                Py_DECREF(x);
            }
        }
        for (Py_ssize_t l = 0; l < nl; l++) {
            if (!held[l * n + i]) continue;
            int in_order = 0;
            for (Py_ssize_t q = 0; q < PyList_GET_SIZE(order) && !in_order; q++)
                in_order = PyLong_AsSsize_t(PyList_GET_ITEM(order, q)) == l;
            if (in_order) continue;
            PyObject *x = PyLong_FromSsize_t(l);
            if (x == NULL || PyList_Append(order, x) < 0) {
                Py_XDECREF(x);
                Py_DECREF(rkey);
                goto done;
            }
            Py_DECREF(x);
        }
        PyObject *ids_of = PyDict_GetItemWithError(merged, rkey);
        if (ids_of == NULL) {
            if (PyErr_Occurred() || (ids_of = PyList_New(0)) == NULL || PyDict_SetItem(merged, rkey, ids_of) < 0) {
                Py_XDECREF(ids_of);
                Py_DECREF(rkey);
                goto done;
            }
            Py_DECREF(ids_of);
        }
        Py_DECREF(rkey);
        if (PyList_Append(ids_of, PyList_GET_ITEM(ids, i)) < 0) goto done;
        if (stage[i] < stage[r]) stage[r] = stage[i];
        if (best[i] < best[r]) best[r] = best[i];
    }
    /* renumber the kept rows */
    Py_ssize_t kept = 0;
    for (Py_ssize_t j = 0; j < n; j++) at[j] = gone[j] ? -1 : kept++;
    for (Py_ssize_t j = 0; j < n; j++) {
        if (at[root[j]] < 0) {
            PyErr_SetString(PyExc_ValueError, "merge_rows: a root was merged away");
            goto done;
        }
        to[j] = at[root[j]];
    }
    o_ids = PyList_New(kept);
    o_hits = PyList_New(kept);
    if (o_ids == NULL || o_hits == NULL) goto done;
    for (Py_ssize_t j = 0; j < n; j++) {
        if (gone[j]) continue;
        PyList_SET_ITEM(o_ids, at[j], Py_NewRef(PyList_GET_ITEM(ids, j)));
        PyList_SET_ITEM(o_hits, at[j], Py_NewRef(PyList_GET_ITEM(hits, j)));
        stage[at[j]] = stage[j]; /* at[j] <= j: compacting in place is safe */
        nbest[at[j]] = best[j];
    }
    o_merged = PyDict_New();
    o_order = PyDict_New();
    if (o_merged == NULL || o_order == NULL) goto done;
    {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(merged, &pos, &k, &v)) {
            PyObject *nk = PyLong_FromSsize_t(at[PyLong_AsSsize_t(k)]);
            if (nk == NULL || PyDict_SetItem(o_merged, nk, v) < 0) {
                Py_XDECREF(nk);
                goto done;
            }
            Py_DECREF(nk);
        }
        pos = 0;
        while (PyDict_Next(orders, &pos, &k, &v)) {
            PyObject *nk = PyLong_FromSsize_t(at[PyLong_AsSsize_t(k)]);
            if (nk == NULL || PyDict_SetItem(o_order, nk, v) < 0) {
                Py_XDECREF(nk);
                goto done;
            }
            Py_DECREF(nk);
        }
    }
    o_rows = PyList_New(nl);
    o_native = PyList_New(nl);
    o_norm = PyList_New(nl);
    if (o_rows == NULL || o_native == NULL || o_norm == NULL) goto done;
    for (Py_ssize_t l = 0; l < nl; l++) {
        PyObject *native = PyList_GET_ITEM(native_in, l), *norm = PyList_GET_ITEM(norm_in, l);
        const Py_ssize_t *lr = lrow + loff[l];
        Py_ssize_t len = loff[l + 1] - loff[l], copies = 0, any_gone = 0;
        for (Py_ssize_t r = 0; r < len; r++) any_gone |= gone[lr[r]];
        /* duplicates among the renumbered rows? (at[] is reused as a per-lane mark: reset below) */
        for (Py_ssize_t r = 0; r < len && any_gone; r++) {
            Py_ssize_t t = to[lr[r]];
            if (at[t] == -2 - l) copies = 1;
            at[t] = -2 - l;
        }
        if (!copies) {
            PyObject *mapped = PyList_New(len);
            if (mapped == NULL) goto done;
            PyList_SET_ITEM(o_rows, l, mapped);
            for (Py_ssize_t r = 0; r < len; r++) {
                PyObject *x = PyLong_FromSsize_t(to[lr[r]]);
                if (x == NULL) goto done;
                PyList_SET_ITEM(mapped, r, x);
            }
            PyList_SET_ITEM(o_native, l, Py_NewRef(native));
            PyList_SET_ITEM(o_norm, l, Py_NewRef(norm));
            continue;
        }
        if (!PyList_Check(native) || !PyList_Check(norm) || PyList_GET_SIZE(native) < len ||
            (PyList_GET_SIZE(norm) != 0 && PyList_GET_SIZE(norm) < len)) {
            PyErr_SetString(PyExc_TypeError, "merge_rows: a lane's scores must be lists as long as its rows");
            goto done;
        }
        int has_norm = PyList_GET_SIZE(norm) != 0;
        PyObject *out_rows = PyList_New(0), *out_native = PyList_New(0), *out_norm = PyList_New(0);
        if (out_rows == NULL || out_native == NULL || out_norm == NULL) {
            Py_XDECREF(out_rows);
            Py_XDECREF(out_native);
            Py_XDECREF(out_norm);
            goto done;
        }
        PyList_SET_ITEM(o_rows, l, out_rows);
        PyList_SET_ITEM(o_native, l, out_native);
        PyList_SET_ITEM(o_norm, l, out_norm);
        for (Py_ssize_t r = 0; r < len; r++) at[to[lr[r]]] = -1;
        for (Py_ssize_t r = 0; r < len; r++) {
            Py_ssize_t t = to[lr[r]];
            if (at[t] >= 0) { /* a later copy: only its normalised score may count */
                if (has_norm) {
                    PyObject *cur = PyList_GET_ITEM(out_norm, at[t]), *cand = PyList_GET_ITEM(norm, r);
                    int gt = PyObject_RichCompareBool(cand, cur, Py_GT);
                    if (gt < 0) goto done;
                    if (gt) {
                        Py_INCREF(cand);
                        PyList_SET_ITEM(out_norm, at[t], cand);
                        Py_DECREF(cur);
                    }
                }
                continue;
            }
            at[t] = PyList_GET_SIZE(out_rows);
            PyObject *x = PyLong_FromSsize_t(t);
            if (x == NULL || PyList_Append(out_rows, x) < 0) {
                Py_XDECREF(x);
                goto done;
            }
            Py_DECREF(x);
            if (PyList_Append(out_native, PyList_GET_ITEM(native, r)) < 0) goto done;
            if (has_norm && PyList_Append(out_norm, PyList_GET_ITEM(norm, r)) < 0) goto done;
        }
        for (Py_ssize_t r = 0; r < PyList_GET_SIZE(out_rows); r++) {
            Py_ssize_t t = PyLong_AsSsize_t(PyList_GET_ITEM(out_rows, r));
            if (r + 1 < nbest[t]) nbest[t] = r + 1;
        }
    }
    o_stage = ssize_list(stage, kept);
    o_best = ssize_list(nbest, kept);
    if (o_stage == NULL || o_best == NULL) goto done;
    result = Py_BuildValue("(OOOOOOOOO)", o_ids, o_hits, o_stage, o_best, o_merged, o_order, o_rows, o_native, o_norm);
done:
    PyMem_Free(stage);
    PyMem_Free(best);
    PyMem_Free(root);
    PyMem_Free(members);
    PyMem_Free(to);
    PyMem_Free(nbest);
    PyMem_Free(at);
    PyMem_Free(gone);
    PyMem_Free(touched);
    PyMem_Free(held);
    PyMem_Free(loff);
    PyMem_Free(lrow);
    Py_XDECREF(orders);
    Py_XDECREF(merged);
    Py_XDECREF(o_ids);
    Py_XDECREF(o_hits);
    Py_XDECREF(o_stage);
    Py_XDECREF(o_best);
    Py_XDECREF(o_merged);
    Py_XDECREF(o_order);
    Py_XDECREF(o_rows);
    Py_XDECREF(o_native);
    Py_XDECREF(o_norm);
    return result;
}


/* ------------------------------------------------------------------ scoring and ranking */

/* A list of floats (ints allowed, converted as Python converts them in arithmetic) as doubles. -1 on error. */
static int as_doubles(PyObject *list, double *out, Py_ssize_t n) {
    if (!PyList_Check(list) || PyList_GET_SIZE(list) != n) {
        PyErr_SetString(PyExc_ValueError, "a score column has the wrong length");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyList_GET_ITEM(list, i);
        out[i] = PyFloat_CheckExact(x) ? PyFloat_AS_DOUBLE(x) : PyFloat_AsDouble(x);
        if (out[i] == -1.0 && PyErr_Occurred()) return -1;
    }
    return 0;
}


/* rrf_sums(rows, weights, k, lanes) -> [0.0 + sum over lanes of w / (k + rank)] per row, added lane by lane (in
 * the order of lanes) as fusion.combine._lane_sums adds them. */
static PyObject *rrf_sums(PyObject *self, PyObject *args) {
    PyObject *rows_in, *weights_in, *lanes_in;
    Py_ssize_t n, k;
    if (!PyArg_ParseTuple(args, "O!O!nnO:rrf_sums", &PyList_Type, &rows_in, &PyList_Type, &weights_in, &n, &k,
                          &lanes_in))
        return NULL;
    PyObject *lanes = PySequence_Fast(lanes_in, "lanes must be a sequence");
    if (lanes == NULL) return NULL;
    double *sums = PyMem_Calloc((size_t)(n ? n : 1), sizeof(double));
    PyObject *result = NULL;
    if (sums == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t q = 0; q < PySequence_Fast_GET_SIZE(lanes); q++) {
        Py_ssize_t l = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(lanes, q));
        if (l == -1 && PyErr_Occurred()) goto done;
        if (l < 0 || l >= PyList_GET_SIZE(rows_in) || l >= PyList_GET_SIZE(weights_in)) {
            PyErr_SetString(PyExc_IndexError, "rrf_sums: lane out of range");
            goto done;
        }
        double w = PyFloat_AsDouble(PyList_GET_ITEM(weights_in, l));
        if (w == -1.0 && PyErr_Occurred()) goto done;
        PyObject *rows = PyList_GET_ITEM(rows_in, l);
        if (!PyList_Check(rows)) {
            PyErr_SetString(PyExc_TypeError, "rrf_sums: a lane's rows must be a list");
            goto done;
        }
        for (Py_ssize_t r = 0; r < PyList_GET_SIZE(rows); r++) {
            Py_ssize_t j = PyLong_AsSsize_t(PyList_GET_ITEM(rows, r));
            if (j == -1 && PyErr_Occurred()) goto done;
            if (j < 0 || j >= n) {
                PyErr_SetString(PyExc_IndexError, "rrf_sums: row out of range");
                goto done;
            }
            sums[j] += w / (double)(k + r + 1);
        }
    }
    result = double_list(sums, n);
done:
    PyMem_Free(sums);
    Py_DECREF(lanes);
    return result;
}

typedef struct {
    const double *total, *base;
    const Py_ssize_t *stage, *best;
    PyObject *const *ids;
    int stage_first;
} RankKeys;

/* -1, 0, 1: row a before, tied with, after row b in (stage?, -total, -base, stage?, best, id). */
static int rank_cmp(const RankKeys *c, Py_ssize_t a, Py_ssize_t b) {
    if (c->stage_first && c->stage[a] != c->stage[b]) return c->stage[a] < c->stage[b] ? -1 : 1;
    if (c->total[a] != c->total[b]) return c->total[a] > c->total[b] ? -1 : 1;
    if (c->base[a] != c->base[b]) return c->base[a] > c->base[b] ? -1 : 1;
    if (!c->stage_first && c->stage[a] != c->stage[b]) return c->stage[a] < c->stage[b] ? -1 : 1;
    if (c->best[a] != c->best[b]) return c->best[a] < c->best[b] ? -1 : 1;
    int d = PyUnicode_Compare(c->ids[a], c->ids[b]);
    if (d != 0) return d < 0 ? -1 : 1;
    return a < b ? -1 : (a > b);
}

static void rank_sort(const RankKeys *c, Py_ssize_t *v, Py_ssize_t *tmp, Py_ssize_t n) {
    if (n < 2) return;
    if (n <= 16) {
        for (Py_ssize_t i = 1; i < n; i++) {
            Py_ssize_t x = v[i], j = i;
            while (j > 0 && rank_cmp(c, v[j - 1], x) > 0) {
                v[j] = v[j - 1];
                j--;
            }
            v[j] = x;
        }
        return;
    }
    Py_ssize_t h = n / 2;
    rank_sort(c, v, tmp, h);
    rank_sort(c, v + h, tmp, n - h);
    Py_ssize_t i = 0, j = h, o = 0;
    while (i < h && j < n) tmp[o++] = rank_cmp(c, v[j], v[i]) < 0 ? v[j++] : v[i++];
    while (i < h) tmp[o++] = v[i++];
    while (j < n) tmp[o++] = v[j++];
    memcpy(v, tmp, (size_t)n * sizeof(Py_ssize_t));
}

/* rank_rows(w_base, base, factors, norm, stage, best, ids, stage_first) -> (total, order) or None.
 * fusion.rank.Ranker: total = (w_base * base + w1 * f1 + ...) / norm added left to right (base itself when factors
 * is empty: total is then None, the caller keeps base), and the rows sorted by the deterministic order. None
 * when a score is NaN or an id is not a str (the Python sort decides those). */
static PyObject *rank_rows(PyObject *self, PyObject *args) {
    double w_base, norm;
    PyObject *base_in, *factors_in, *stage_in, *best_in, *ids;
    int stage_first;
    if (!PyArg_ParseTuple(args, "dO!OdO!O!O!p:rank_rows", &w_base, &PyList_Type, &base_in, &factors_in, &norm,
                          &PyList_Type, &stage_in, &PyList_Type, &best_in, &PyList_Type, &ids, &stage_first))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(ids);
    PyObject *factors = PySequence_Fast(factors_in, "factors must be a sequence");
    if (factors == NULL) return NULL;
    Py_ssize_t nf = PySequence_Fast_GET_SIZE(factors);
    size_t m = (size_t)(n ? n : 1);
    double *base = PyMem_Malloc(m * sizeof(double)), *total = PyMem_Malloc(m * sizeof(double));
    double *col = PyMem_Malloc(m * sizeof(double));
    Py_ssize_t *stage = PyMem_Malloc(m * sizeof(Py_ssize_t)), *best = PyMem_Malloc(m * sizeof(Py_ssize_t));
    Py_ssize_t *order = PyMem_Malloc(m * sizeof(Py_ssize_t)), *tmp = PyMem_Malloc(m * sizeof(Py_ssize_t));
    PyObject *result = NULL, *total_out = NULL, *order_out = NULL;
    if (!base || !total || !col || !stage || !best || !order || !tmp) {
        PyErr_NoMemory();
        goto done;
    }
    if (as_doubles(base_in, base, n) < 0 || PyList_GET_SIZE(stage_in) != n || PyList_GET_SIZE(best_in) != n ||
        as_ssize_array(stage_in, stage, n) < 0 || as_ssize_array(best_in, best, n) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "rank_rows: columns of different lengths");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) total[i] = w_base * base[i];
    for (Py_ssize_t f = 0; f < nf; f++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(factors, f);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "rank_rows: factors must be (weight, column) pairs");
            goto done;
        }
        double w = PyFloat_AsDouble(PyTuple_GET_ITEM(pair, 0));
        if ((w == -1.0 && PyErr_Occurred()) || as_doubles(PyTuple_GET_ITEM(pair, 1), col, n) < 0) goto done;
        for (Py_ssize_t i = 0; i < n; i++) total[i] = total[i] + w * col[i];
    }
    if (nf > 0)
        for (Py_ssize_t i = 0; i < n; i++) total[i] = total[i] / norm;
    else
        memcpy(total, base, m * sizeof(double));
    for (Py_ssize_t i = 0; i < n; i++) {
        if (isnan(total[i]) || isnan(base[i]) || !PyUnicode_Check(PyList_GET_ITEM(ids, i))) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        order[i] = i;
    }
    RankKeys keys = {total, base, stage, best, PySequence_Fast_ITEMS(ids), stage_first};
    rank_sort(&keys, order, tmp, n);
    order_out = PyList_New(n);
    if (order_out == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyLong_FromSsize_t(order[i]);
        if (x == NULL) goto done;
        PyList_SET_ITEM(order_out, i, x);
    }
    if (nf > 0) {
        total_out = double_list(total, n);
        if (total_out == NULL) goto done;
    } else {
        total_out = Py_NewRef(Py_None);
    }
    result = PyTuple_Pack(2, total_out, order_out);
done:
    PyMem_Free(base);
    PyMem_Free(total);
    PyMem_Free(col);
    PyMem_Free(stage);
    PyMem_Free(best);
    PyMem_Free(order);
    PyMem_Free(tmp);
    Py_XDECREF(total_out);
    Py_XDECREF(order_out);
    Py_DECREF(factors);
    return result;
}


/* score_base(rows, norm, weights, n, lane_order, combmnz, ceiling) -> per-row base score of the score modes.
 * fusion.combine._score_base: sum of w * norm over the row's lanes, lane by lane (a merged row: in the order its
 * lanes joined it), times the lane count with CombMNZ, over the ceiling. */
static PyObject *score_base(PyObject *self, PyObject *args) {
    PyObject *rows_in, *norm_in, *weights_in, *lane_order;
    Py_ssize_t n;
    int combmnz;
    double ceiling;
    if (!PyArg_ParseTuple(args, "O!O!O!nO!pd:score_base", &PyList_Type, &rows_in, &PyList_Type, &norm_in,
                          &PyList_Type, &weights_in, &n, &PyDict_Type, &lane_order, &combmnz, &ceiling))
        return NULL;
    Py_ssize_t nl = PyList_GET_SIZE(rows_in);
    if (PyList_GET_SIZE(norm_in) != nl || PyList_GET_SIZE(weights_in) != nl) {
        PyErr_SetString(PyExc_ValueError, "score_base: one score list and one weight per lane");
        return NULL;
    }
    double *total = PyMem_Calloc((size_t)(n ? n : 1), sizeof(double)), *w = PyMem_Malloc((size_t)(nl + 1) * sizeof(double));
    Py_ssize_t *count = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Py_ssize_t));
    PyObject *result = NULL;
    if (total == NULL || w == NULL || count == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t l = 0; l < nl; l++) {
        w[l] = PyFloat_AsDouble(PyList_GET_ITEM(weights_in, l));
        if (w[l] == -1.0 && PyErr_Occurred()) goto done;
        PyObject *rows = PyList_GET_ITEM(rows_in, l), *norm = PyList_GET_ITEM(norm_in, l);
        if (!PyList_Check(rows) || !PyList_Check(norm) || PyList_GET_SIZE(rows) != PyList_GET_SIZE(norm)) {
            PyErr_SetString(PyExc_ValueError, "score_base: a lane's rows and scores must be lists of one length");
            goto done;
        }
        for (Py_ssize_t r = 0; r < PyList_GET_SIZE(rows); r++) {
            Py_ssize_t j = PyLong_AsSsize_t(PyList_GET_ITEM(rows, r));
            if (j == -1 && PyErr_Occurred()) goto done;
            if (j < 0 || j >= n) {
                PyErr_SetString(PyExc_IndexError, "score_base: row out of range");
                goto done;
            }
            double v = PyFloat_AsDouble(PyList_GET_ITEM(norm, r));
            if (v == -1.0 && PyErr_Occurred()) goto done;
            total[j] += w[l] * v;
            count[j] += 1;
        }
    }
    Py_ssize_t pos = 0;
    PyObject *key, *lanes;
    while (PyDict_Next(lane_order, &pos, &key, &lanes)) {
        Py_ssize_t row = PyLong_AsSsize_t(key);
        if ((row == -1 && PyErr_Occurred()) || !PyList_Check(lanes)) goto bad_order;
        if (row < 0 || row >= n) goto bad_order;
        double t = 0.0;
        for (Py_ssize_t q = 0; q < PyList_GET_SIZE(lanes); q++) {
            Py_ssize_t l = PyLong_AsSsize_t(PyList_GET_ITEM(lanes, q));
            if ((l == -1 && PyErr_Occurred()) || l < 0 || l >= nl) goto bad_order;
            PyObject *rows = PyList_GET_ITEM(rows_in, l);
            Py_ssize_t at = -1;
            for (Py_ssize_t r = 0; r < PyList_GET_SIZE(rows) && at < 0; r++)
                if (PyLong_AsSsize_t(PyList_GET_ITEM(rows, r)) == row) at = r;
            if (at < 0) goto bad_order;
            double v = PyFloat_AsDouble(PyList_GET_ITEM(PyList_GET_ITEM(norm_in, l), at));
            if (v == -1.0 && PyErr_Occurred()) goto done;
            t += w[l] * v;
        }
        total[row] = t;
    }
    for (Py_ssize_t j = 0; j < n; j++) total[j] = combmnz ? total[j] * (double)count[j] / ceiling : total[j] / ceiling;
    result = double_list(total, n);
    goto done;
bad_order:
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "score_base: a merged row's lane order is not valid");
done:
    PyMem_Free(total);
    PyMem_Free(w);
    PyMem_Free(count);
    return result;
}

/* minmax(scores) -> list or None. fusion.score.normalise_minmax for a sequence of floats (None when some score
 * is not a float: the Python version handles it): non-finite scores become the lowest finite one (0.0 if none),
 * then (s - min) / (max - min), or 1.0 for every score when max <= min. min and max keep the first of equal
 * values, as Python's do. */
static PyObject *minmax(PyObject *self, PyObject *arg) {
    PyObject *seq = PySequence_Fast(arg, "scores must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq), *result = NULL;
    double *v = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(double));
    if (v == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int all_finite = 1, any_finite = 0;
    double low = 0.0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyFloat_CheckExact(items[i])) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        v[i] = PyFloat_AS_DOUBLE(items[i]);
        if (isfinite(v[i])) {
            if (!any_finite || v[i] < low) low = v[i];
            any_finite = 1;
        } else {
            all_finite = 0;
        }
    }
    if (!all_finite)
        for (Py_ssize_t i = 0; i < n; i++)
            if (!isfinite(v[i])) v[i] = any_finite ? low : 0.0;
    result = PyList_New(n);
    if (result == NULL || n == 0) goto done;
    double lo = v[0], hi = v[0];
    for (Py_ssize_t i = 1; i < n; i++) {
        if (v[i] < lo) lo = v[i];
        if (v[i] > hi) hi = v[i];
    }
    double span = hi - lo;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyFloat_FromDouble(hi <= lo ? 1.0 : (v[i] - lo) / span);
        if (x == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, x);
    }
done:
    PyMem_Free(v);
    Py_DECREF(seq);
    return result;
}


/* ------------------------------------------------------------------ url_groups and sig_groups */

/* PyLong_AsUnsignedLongLong(o) into *out: 0, or -1 with its exception. On CPython 3.11 an exact int that fits is
 * read from its digits (PyLong_AsUnsignedLongLong converts through a byte array there, several times slower);
 * anything else, and every int on later versions (another layout), goes through the function itself. */
static int u64_of(PyObject *o, uint64_t *out) {
#if PY_VERSION_HEX < 0x030C0000
    if (PyLong_CheckExact(o) && Py_SIZE(o) >= 0) {
        const digit *d = ((PyLongObject *)o)->ob_digit;
        uint64_t x = 0;
        Py_ssize_t i = Py_SIZE(o);
        while (--i >= 0 && (x >> (64 - PyLong_SHIFT)) == 0) x = (x << PyLong_SHIFT) | d[i];
        if (i < 0) { /* every digit taken without a bit shifted out: the value fits */
            *out = x;
            return 0;
        }
    }
#endif
    *out = PyLong_AsUnsignedLongLong(o);
    return *out == (uint64_t)-1 && PyErr_Occurred() ? -1 : 0;
}

static PyObject *s_url, *s_url_key, *s_text, *s_why_url, *s_why_near, *s_why_content;

/* url_groups(hits, groups, url_key) -> [(row, key), ...] or None.
 * fusion.dedup._url_duplicates up to the token sets: stored URL keys (url_key(hit.url) where missing); rows with
 * an equal non-empty key are united with the key's first row ("url"), in row order; returned are the first rows
 * of the long keys (ending with "#", at least two characters), in row order. None when a key is not a str
 * (nothing was united; the Python version decides). */
static PyObject *url_groups(PyObject *self, PyObject *args) {
    PyObject *hits_in, *groups, *url_key_fn;
    if (!PyArg_ParseTuple(args, "OOO:url_groups", &hits_in, &groups, &url_key_fn)) return NULL;
    PyObject *seq = PySequence_Fast(hits_in, "hits must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **hits = PySequence_Fast_ITEMS(seq);
    PyObject *keys = PyList_New(n), *result = NULL;
    WordTable wt = {NULL, 0, 0};
    Py_ssize_t *firstrow = NULL, *kid = NULL;
    PyObject *const names[2] = {s_url_key, s_url};
    Slots sl;
    int any = 0;
    if (keys == NULL) goto done;
    if (n > 0) slots_init(&sl, hits[0], names, 2);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = slot_get(&sl, hits[i], 0, s_url_key);
        if (key == Py_None) {
            Py_DECREF(key);
            PyObject *url = slot_get(&sl, hits[i], 1, s_url);
            key = url == NULL ? NULL : PyObject_CallOneArg(url_key_fn, url);
            Py_XDECREF(url);
        }
        if (key == NULL) goto done;
        PyList_SET_ITEM(keys, i, key);
        if (!PyUnicode_CheckExact(key)) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        any |= PyUnicode_GET_LENGTH(key) > 0;
    }
    result = PyList_New(0);
    if (result == NULL || !any) goto done;
    /* keys interned by their bytes (keys keeps them alive), all before any union: a key that cannot be (a lone
     * surrogate) hands the input back untouched */
    if (words_init(&wt, (size_t)n) < 0) goto fail;
    firstrow = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(Py_ssize_t));
    kid = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(Py_ssize_t));
    if (firstrow == NULL || kid == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t before = wt.count;
        kid[i] = str_id(&wt, PyList_GET_ITEM(keys, i));
        if (kid[i] == -1) goto fail;
        if (kid[i] == -2) {
            Py_DECREF(result);
            result = Py_NewRef(Py_None);
            goto done;
        }
        if (kid[i] == before) firstrow[kid[i]] = i;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        Py_ssize_t len = PyUnicode_GET_LENGTH(key);
        if (firstrow[kid[i]] != i) {
            if (len > 0 && union_rows(groups, firstrow[kid[i]], i, s_why_url) < 0) goto fail;
            continue;
        }
        if (len >= 2 && PyUnicode_READ_CHAR(key, len - 1) == '#') {
            PyObject *v = PyLong_FromSsize_t(i);
            PyObject *pair = v == NULL ? NULL : PyTuple_Pack(2, v, key);
            Py_XDECREF(v);
            if (pair == NULL || PyList_Append(result, pair) < 0) {
                Py_XDECREF(pair);
                goto fail;
            }
            Py_DECREF(pair);
        }
    }
    goto done;
fail:
    Py_CLEAR(result);
done:
    Py_XDECREF(keys);
    PyMem_Free(wt.slots);
    PyMem_Free(firstrow);
    PyMem_Free(kid);
    Py_DECREF(seq);
    return result;
}

typedef struct {
    uint64_t lo, hi;
    Py_ssize_t a, b;
} SigPair;

static int cmp_sigpair(const void *x, const void *y) {
    const SigPair *p = x, *q = y;
    if (p->lo != q->lo) return p->lo < q->lo ? -1 : 1;
    if (p->hi != q->hi) return p->hi < q->hi ? -1 : 1;
    return 0;
}

/* Append a close pair (u < w, distinct signatures) as (smaller, larger) signature with their first rows. */
static int push_sigpair(SigPair **pairs, Py_ssize_t *np, Py_ssize_t *cap, const uint64_t *uv,
                        const Py_ssize_t *ufirst, Py_ssize_t u, Py_ssize_t w) {
    if (*np == *cap) {
        Py_ssize_t c = *cap ? *cap * 2 : 64;
        SigPair *p = PyMem_Realloc(*pairs, (size_t)c * sizeof(SigPair));
        if (p == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        *pairs = p;
        *cap = c;
    }
    int swap = uv[u] > uv[w];
    SigPair *q = &(*pairs)[(*np)++];
    q->lo = swap ? uv[w] : uv[u];
    q->hi = swap ? uv[u] : uv[w];
    q->a = swap ? ufirst[w] : ufirst[u];
    q->b = swap ? ufirst[u] : ufirst[w];
    return 0;
}

/* The close pairs of the nu distinct signatures uv, as fusion.near.near_pairs finds them: every pair up to
 * all_pairs signatures; beyond, max_bits + 1 bit bands of 64 // (max_bits + 1) bits (two signatures within max_bits
 * bits agree on some band), each pair of signatures that agree on a band checked (the bands must be at most 12
 * bits wide: 4 <= max_bits <= 8). *comparisons: the pairs checked, counted as near_pairs counts them. The pairs
 * come sorted by (smaller, larger) signature, each once. -1 on error. */
static int sig_pairs(const uint64_t *uv, const Py_ssize_t *ufirst, Py_ssize_t nu, int max_bits, Py_ssize_t all_pairs,
                     SigPair **pairs, Py_ssize_t *np, Py_ssize_t *comparisons) {
    Py_ssize_t cap = 0;
    *pairs = NULL;
    *np = 0;
    *comparisons = 0;
    if (nu < 2) return 0;
    if (nu <= all_pairs) {
        Py_ssize_t found;
        Py_ssize_t *idx = close_pairs(uv, nu, max_bits, &found);
        if (idx == NULL) return -1;
        for (Py_ssize_t q = 0; q < found; q += 2)
            if (push_sigpair(pairs, np, &cap, uv, ufirst, idx[q], idx[q + 1]) < 0) {
                PyMem_Free(idx);
                return -1;
            }
        PyMem_Free(idx);
        *comparisons = nu * (nu - 1) / 2;
    } else {
        int bands = max_bits + 1, width = 64 / bands;
        uint64_t mask = ((uint64_t)1 << width) - 1;
        size_t nb = (size_t)1 << width;
        /* Per band, the signatures of each key as a chain (head[key], next[u]); stamp[key] says which band last
         * used the key, so nothing is cleared between bands. */
        Py_ssize_t *head = PyMem_Malloc(nb * sizeof(Py_ssize_t)), *next = PyMem_Malloc((size_t)nu * sizeof(Py_ssize_t));
        unsigned char *stamp = PyMem_Calloc(nb, 1);
        int rc = 0;
        if (head == NULL || next == NULL || stamp == NULL) {
            PyErr_NoMemory();
            rc = -1;
        }
        for (int b = 0; b < bands && rc == 0; b++) {
            int shift = width * b;
            for (Py_ssize_t u = 0; u < nu; u++) {
                size_t k = (size_t)((uv[u] >> shift) & mask);
                if (stamp[k] != b + 1) {
                    stamp[k] = (unsigned char)(b + 1);
                    head[k] = -1;
                }
                next[u] = head[k];
                head[k] = u;
            }
            for (Py_ssize_t u = 0; u < nu && rc == 0; u++) { /* each chain once, from its head */
                size_t k = (size_t)((uv[u] >> shift) & mask);
                if (head[k] != u || next[u] < 0) continue;
                Py_ssize_t g = 0;
                for (Py_ssize_t x = u; x >= 0 && rc == 0; x = next[x], g++)
                    for (Py_ssize_t y = next[x]; y >= 0; y = next[y])
                        if (__builtin_popcountll(uv[x] ^ uv[y]) <= max_bits &&
                            push_sigpair(pairs, np, &cap, uv, ufirst, Py_MIN(x, y), Py_MAX(x, y)) < 0) {
                            rc = -1;
                            break;
                        }
                *comparisons += g * (g - 1) / 2;
            }
        }
        PyMem_Free(head);
        PyMem_Free(next);
        PyMem_Free(stamp);
        if (rc < 0) return -1;
    }
    qsort(*pairs, (size_t)*np, sizeof(SigPair), cmp_sigpair);
    Py_ssize_t w = 0; /* a pair found on several bands counts once */
    for (Py_ssize_t q = 0; q < *np; q++)
        if (w == 0 || cmp_sigpair(&(*pairs)[w - 1], &(*pairs)[q]) != 0) (*pairs)[w++] = (*pairs)[q];
    *np = w;
    return 0;
}

/* sig_groups(sigs, hits, groups, max_bits, limit, all_pairs, norm_text) -> (comparisons, signed, unique) or None.
 * The SimHash part of fusion.dedup.find_duplicates for at most `limit` distinct signatures (None beyond, or when
 * there are more than all_pairs and max_bits is outside 4..8, before any union: the Python version decides): rows
 * with an equal signature are united with its first row ("content" when the texts are equal or equal after
 * norm_text, else "near"), in row order; then every pair of distinct signatures within max_bits bits (sig_pairs),
 * in ascending (smaller, larger) signature order, unites the two signatures' first rows ("near").
 * comparisons: the pairs checked, as fusion.near.near_pairs counts them. */
static PyObject *sig_groups(PyObject *self, PyObject *args) {
    PyObject *sigs_in, *hits_in, *groups, *norm_text;
    int max_bits;
    Py_ssize_t limit, all_pairs;
    if (!PyArg_ParseTuple(args, "OOOinnO:sig_groups", &sigs_in, &hits_in, &groups, &max_bits, &limit, &all_pairs,
                          &norm_text))
        return NULL;
    PyObject *sigs = PySequence_Fast(sigs_in, "signatures must be a sequence");
    if (sigs == NULL) return NULL;
    PyObject *hits = PySequence_Fast(hits_in, "hits must be a sequence");
    if (hits == NULL) {
        Py_DECREF(sigs);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(sigs), nu = 0, signed_n = 0, np = 0;
    size_t m = (size_t)(n ? n : 1);
    uint64_t *v = PyMem_Malloc(m * sizeof(uint64_t)), *uv = PyMem_Malloc(m * sizeof(uint64_t));
    Py_ssize_t *firstrow = PyMem_Malloc(m * sizeof(Py_ssize_t)), *ufirst = PyMem_Malloc(m * sizeof(Py_ssize_t));
    Py_ssize_t *tab = PyMem_Malloc(m * sizeof(Py_ssize_t)); /* table index -> distinct signature index */
    char *has = PyMem_Calloc(m, 1);
    SigPair *pairs = NULL;
    KeyTable kt = {NULL, 0, 0};
    PyObject *result = NULL;
    if (!v || !uv || !firstrow || !ufirst || !tab || !has) {
        PyErr_NoMemory();
        goto done;
    }
    if (PySequence_Fast_GET_SIZE(hits) != n) {
        PyErr_SetString(PyExc_ValueError, "sig_groups: one signature per hit");
        goto done;
    }
    if (keys_init(&kt, m) < 0) goto done;
    /* first row of each signature; KeyTable maps sig + 1 (0 marks empty), so map the one sig that would wrap */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PySequence_Fast_GET_ITEM(sigs, i);
        if (s == Py_None) continue;
        if (u64_of(s, &v[i]) < 0) goto done;
        has[i] = 1;
        signed_n++;
    }
    /* the first row of each signature, distinct signatures in order of first appearance (the table's keys are
     * (high, low) halves plus one, so the one signature that would wrap, all ones, is kept aside) */
    Py_ssize_t all_ones = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!has[i]) continue;
        Py_ssize_t u;
        if (v[i] == UINT64_MAX) {
            if (all_ones < 0) {
                all_ones = nu;
                uv[nu] = v[i];
                ufirst[nu++] = i;
            }
            u = all_ones;
        } else {
            Py_ssize_t before = kt.count;
            Py_ssize_t idx = keys_idx(&kt, (Py_ssize_t)(v[i] >> 32), (Py_ssize_t)(v[i] & 0xffffffffULL));
            if (idx < 0) goto done;
            if (idx == before) {
                tab[idx] = nu;
                uv[nu] = v[i];
                ufirst[nu++] = i;
            }
            u = tab[idx];
        }
        firstrow[i] = ufirst[u];
    }
    if (nu > limit || (nu > all_pairs && (max_bits < 4 || max_bits > 8))) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!has[i] || firstrow[i] == i) continue;
        Py_ssize_t j = firstrow[i];
        PyObject *ta = PyObject_GetAttr(PySequence_Fast_GET_ITEM(hits, j), s_text);
        PyObject *tb = ta == NULL ? NULL : PyObject_GetAttr(PySequence_Fast_GET_ITEM(hits, i), s_text);
        int same = tb == NULL ? -1 : PyObject_RichCompareBool(ta, tb, Py_EQ);
        if (same == 0) {
            PyObject *na = PyObject_CallOneArg(norm_text, ta), *nb = na == NULL ? NULL : PyObject_CallOneArg(norm_text, tb);
            same = nb == NULL ? -1 : PyObject_RichCompareBool(na, nb, Py_EQ);
            Py_XDECREF(na);
            Py_XDECREF(nb);
        }
        Py_XDECREF(ta);
        Py_XDECREF(tb);
        if (same < 0 || union_rows(groups, j, i, same ? s_why_content : s_why_near) < 0) goto done;
    }
    Py_ssize_t comparisons;
    if (sig_pairs(uv, ufirst, nu, max_bits, all_pairs, &pairs, &np, &comparisons) < 0) goto done;
    for (Py_ssize_t q = 0; q < np; q++)
        if (union_rows(groups, pairs[q].a, pairs[q].b, s_why_near) < 0) goto done;
    result = Py_BuildValue("(nnn)", comparisons, signed_n, nu);
done:
    PyMem_Free(v);
    PyMem_Free(uv);
    PyMem_Free(firstrow);
    PyMem_Free(ufirst);
    PyMem_Free(tab);
    PyMem_Free(has);
    PyMem_Free(pairs);
    PyMem_Free(kt.slots);
    Py_DECREF(sigs);
    Py_DECREF(hits);
    return result;
}


/* ------------------------------------------------------------------ ranking factors */

static PyObject *s_published_at, *s_quality, *unknown_half, *float_one, *float_zero;

/* One attribute of every hit, as a new list (slot reads where the class allows). */
static PyObject *column_of(PyObject *hits_in, PyObject *name) {
    PyObject *seq = PySequence_Fast(hits_in, "hits must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **hits = PySequence_Fast_ITEMS(seq);
    PyObject *out = PyList_New(n);
    Slots sl;
    if (out != NULL && n > 0) slots_init(&sl, hits[0], &name, 1);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *v = slot_get(&sl, hits[i], 0, name);
        if (v == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, i, v);
    }
    Py_DECREF(seq);
    return out;
}

/* column(hits, name) -> [hit.<name> for hit in hits] (slot reads where the class allows). */
static PyObject *column(PyObject *self, PyObject *args) {
    PyObject *hits, *name;
    if (!PyArg_ParseTuple(args, "OU:column", &hits, &name)) return NULL;
    return column_of(hits, name);
}

static int any_true(PyObject *list) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        int t = PyObject_IsTrue(PyList_GET_ITEM(list, i));
        if (t != 0) return t;
    }
    return 0;
}

static PyObject *repeat_list(PyObject *value, Py_ssize_t n) {
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) PyList_SET_ITEM(out, i, Py_NewRef(value));
    return out;
}

/* domain_diversity(hits) -> 1 / (hits sharing the domain), 0.5 without a domain (fusion.boosts). */
static PyObject *domain_diversity(PyObject *self, PyObject *hits) {
    PyObject *domains = column_of(hits, s_domain), *counts = NULL, *out = NULL;
    if (domains == NULL) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(domains);
    int any = any_true(domains);
    if (any <= 0) {
        out = any < 0 ? NULL : repeat_list(unknown_half, n);
        goto done;
    }
    /* Domains that are all exact strs: counted by their bytes, no Python hashing. */
    {
        WordTable wt = {NULL, 0, 0};
        Py_ssize_t *ids = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(Py_ssize_t));
        Py_ssize_t *cnt = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Py_ssize_t));
        int fast = ids != NULL && cnt != NULL && words_init(&wt, (size_t)n) == 0;
        for (Py_ssize_t i = 0; fast && i < n; i++) {
            PyObject *d = PyList_GET_ITEM(domains, i);
            if (d == Py_None || (PyUnicode_CheckExact(d) && PyUnicode_GET_LENGTH(d) == 0)) {
                ids[i] = -1;
                continue;
            }
            ids[i] = domain_id(&wt, d);
            if (ids[i] == -1) fast = 0; /* an error: reported below */
            else if (ids[i] == -2) fast = -1;
            else cnt[ids[i]]++;
        }
        if (fast == 1) { /* one float object per domain, shared by its rows */
            out = PyList_New(n);
            for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
                PyObject *v;
                if (ids[i] < 0) {
                    v = Py_NewRef(unknown_half);
                } else {
                    Py_ssize_t first = cnt[ids[i]] < 0 ? -cnt[ids[i]] - 1 : -1;
                    if (first >= 0) {
                        v = Py_NewRef(PyList_GET_ITEM(out, first));
                    } else {
                        v = PyFloat_FromDouble(1.0 / (double)cnt[ids[i]]);
                        cnt[ids[i]] = -i - 1; /* the row holding this domain's value */
                    }
                }
                if (v == NULL) Py_CLEAR(out);
                else PyList_SET_ITEM(out, i, v);
            }
        } else if (fast == 0 && !PyErr_Occurred()) {
            PyErr_NoMemory();
        }
        PyMem_Free(ids);
        PyMem_Free(cnt);
        PyMem_Free(wt.slots);
        if (fast >= 0) goto done; /* done, or an error */
        PyErr_Clear();
    }
    counts = PyDict_New();
    if (counts == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = PyList_GET_ITEM(domains, i), *c = PyDict_GetItemWithError(counts, d);
        if (c == NULL && PyErr_Occurred()) goto done;
        PyObject *next = PyLong_FromSsize_t(c == NULL ? 1 : PyLong_AsSsize_t(c) + 1);
        if (next == NULL || PyDict_SetItem(counts, d, next) < 0) {
            Py_XDECREF(next);
            goto done;
        }
        Py_DECREF(next);
    }
    out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *d = PyList_GET_ITEM(domains, i), *v;
        int t = PyObject_IsTrue(d);
        if (t < 0) {
            Py_CLEAR(out);
            break;
        }
        v = t ? PyFloat_FromDouble(1.0 / (double)PyLong_AsSsize_t(PyDict_GetItem(counts, d))) : Py_NewRef(unknown_half);
        if (v == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, v);
    }
done:
    Py_DECREF(domains);
    Py_XDECREF(counts);
    return out;
}

/* recency(hits, edges, scores) -> the age-step scores, 0.5 undated (every item when none is dated); None when a
 * date does not compare with the edges (TypeError: the caller scores the dates one by one).
 * edges: the step boundaries now - limit, oldest first; scores: len(edges) + 1 values (bisect_right). */
/* A datetime's fields (year to microsecond, not fold) as one integer in their order. */
static long long packed_datetime(PyObject *d) {
    long long v = PyDateTime_GET_YEAR(d);
    v = v * 13 + PyDateTime_GET_MONTH(d);
    v = v * 32 + PyDateTime_GET_DAY(d);
    v = v * 24 + PyDateTime_DATE_GET_HOUR(d);
    v = v * 60 + PyDateTime_DATE_GET_MINUTE(d);
    v = v * 60 + PyDateTime_DATE_GET_SECOND(d);
    return v * 1000000 + PyDateTime_DATE_GET_MICROSECOND(d);
}

static PyObject *recency(PyObject *self, PyObject *args) {
    PyObject *hits, *edges, *scores;
    if (!PyArg_ParseTuple(args, "OO!O!:recency", &hits, &PyList_Type, &edges, &PyList_Type, &scores)) return NULL;
    Py_ssize_t ne = PyList_GET_SIZE(edges);
    if (PyList_GET_SIZE(scores) != ne + 1) {
        PyErr_SetString(PyExc_ValueError, "recency: one score more than edges");
        return NULL;
    }
    PyObject *dates = column_of(hits, s_published_at), *out = NULL;
    if (dates == NULL) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(dates);
    int any = any_true(dates);
    if (any <= 0) {
        out = any < 0 ? NULL : repeat_list(unknown_half, n);
        goto done;
    }
    /* Exact datetimes with the edges' own tzinfo object compare field by field (what datetime's comparison does
     * for one tzinfo): as packed integers, without a call per comparison. Others go through Python's `<`. */
    long long packed[8];
    PyObject *tz = NULL;
    int fast = ne <= 8;
    for (Py_ssize_t e = 0; e < ne && fast; e++) {
        PyObject *edge = PyList_GET_ITEM(edges, e);
        fast = PyDateTime_CheckExact(edge) && ((PyDateTime_DateTime *)edge)->hastzinfo &&
               (tz == NULL || PyDateTime_DATE_GET_TZINFO(edge) == tz);
        if (fast) {
            tz = PyDateTime_DATE_GET_TZINFO(edge);
            packed[e] = packed_datetime(edge);
        }
    }
    out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *p = PyList_GET_ITEM(dates, i);
        if (p == Py_None) {
            PyList_SET_ITEM(out, i, Py_NewRef(unknown_half));
            continue;
        }
        Py_ssize_t lo = 0, hi = ne;
        if (fast && tz != NULL && PyDateTime_CheckExact(p) && ((PyDateTime_DateTime *)p)->hastzinfo &&
            PyDateTime_DATE_GET_TZINFO(p) == tz) {
            long long x = packed_datetime(p);
            while (lo < hi) { /* bisect_right */
                Py_ssize_t mid = (lo + hi) / 2;
                if (x < packed[mid]) hi = mid;
                else lo = mid + 1;
            }
            PyList_SET_ITEM(out, i, Py_NewRef(PyList_GET_ITEM(scores, lo)));
            continue;
        }
        while (lo < hi) { /* bisect_right */
            Py_ssize_t mid = (lo + hi) / 2;
            int lt = PyObject_RichCompareBool(p, PyList_GET_ITEM(edges, mid), Py_LT);
            if (lt < 0) {
                Py_CLEAR(out);
                if (PyErr_ExceptionMatches(PyExc_TypeError)) { /* a naive date among aware ones: the caller */
                    PyErr_Clear();
                    out = Py_NewRef(Py_None);
                }
                goto done;
            }
            if (lt) hi = mid;
            else lo = mid + 1;
        }
        PyList_SET_ITEM(out, i, Py_NewRef(PyList_GET_ITEM(scores, lo)));
    }
done:
    Py_DECREF(dates);
    return out;
}

static PyObject *s_keyless;

/* fusion.boosts.authority_of(d, table, default) for an ASCII str domain and a dict table of entries with an int
 * or float score: the entry of the lowered domain or of its closest listed parent, keyless bonus added, capped
 * at 1. Anything else goes to fn(d) (the Python function). A new reference, NULL on error. */
static PyObject *authority_one(PyObject *d, PyObject *table, PyObject *dflt, double bonus, PyObject *fn) {
    char low[256];
    Py_ssize_t len = PyUnicode_GET_LENGTH(d);
    if (!PyDict_CheckExact(table) || !PyUnicode_IS_ASCII(d) || len > (Py_ssize_t)sizeof low)
        return PyObject_CallOneArg(fn, d);
    const char *p = (const char *)PyUnicode_DATA(d);
    int lowered = 0;
    for (Py_ssize_t k = 0; k < len; k++) {
        low[k] = (char)(p[k] >= 'A' && p[k] <= 'Z' ? p[k] + 32 : p[k]);
        lowered |= low[k] != p[k];
    }
    for (Py_ssize_t start = 0; start < len;) {
        /* the whole domain, when lowering left it as it was, is looked up as itself (its hash is cached) */
        PyObject *key = start == 0 && !lowered ? Py_NewRef(d) : PyUnicode_FromStringAndSize(low + start, len - start);
        if (key == NULL) return NULL;
        PyObject *entry = PyDict_GetItemWithError(table, key); /* borrowed */
        Py_DECREF(key);
        if (entry == NULL) {
            if (PyErr_Occurred()) return NULL;
            const char *dot = memchr(low + start, '.', (size_t)(len - start));
            if (dot == NULL) break;
            start = dot - low + 1;
            continue;
        }
        Py_INCREF(entry);
        PyObject *score = PyObject_GetAttr(entry, s_score), *keyless = NULL;
        double v = -1.0;
        int fast = 0, truth = -1;
        if (score != NULL && (PyFloat_CheckExact(score) || PyLong_CheckExact(score))) {
            v = PyFloat_CheckExact(score) ? PyFloat_AS_DOUBLE(score) : PyLong_AsDouble(score);
            if (v == -1.0 && PyErr_Occurred()) PyErr_Clear(); /* an int too big for a float: Python's error */
            else fast = 1;
        }
        if (score != NULL) keyless = PyObject_GetAttr(entry, s_keyless);
        if (keyless != NULL) truth = PyObject_IsTrue(keyless);
        Py_XDECREF(score);
        Py_XDECREF(keyless);
        Py_DECREF(entry);
        if (truth < 0) return NULL;
        if (!fast) return PyObject_CallOneArg(fn, d);
        v = v + (truth ? bonus : 0.0);
        return PyFloat_FromDouble(v < 1.0 ? v : 1.0);
    }
    return Py_NewRef(dflt);
}

/* authority(hits, authority_of, default, table, bonus) -> the authority of each hit's domain (authority_one, once
 * per distinct domain), default for hits without a domain or when no hit has one. */
static PyObject *authority(PyObject *self, PyObject *args) {
    PyObject *hits, *fn, *dflt, *table;
    double bonus;
    if (!PyArg_ParseTuple(args, "OOOOd:authority", &hits, &fn, &dflt, &table, &bonus)) return NULL;
    PyObject *domains = column_of(hits, s_domain), *memo = NULL, *out = NULL;
    if (domains == NULL) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(domains);
    int any = any_true(domains);
    if (any <= 0) {
        out = any < 0 ? NULL : repeat_list(dflt, n);
        goto done;
    }
    /* Domains that are all exact strs: looked up by their bytes, one call per distinct domain. */
    {
        WordTable wt = {NULL, 0, 0};
        PyObject **vals = PyMem_Calloc((size_t)(n ? n : 1), sizeof(PyObject *));
        int fast = vals != NULL && words_init(&wt, (size_t)n) == 0;
        if (fast) {
            out = PyList_New(n);
            for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
                PyObject *d = PyList_GET_ITEM(domains, i);
                Py_ssize_t id;
                if (d == Py_None || (PyUnicode_CheckExact(d) && PyUnicode_GET_LENGTH(d) == 0)) {
                    PyList_SET_ITEM(out, i, Py_NewRef(dflt));
                    continue;
                }
                id = domain_id(&wt, d);
                if (id == -2) { /* not a str: Python's own equality below */
                    fast = -1;
                    Py_CLEAR(out);
                    break;
                }
                if (id == -1) {
                    Py_CLEAR(out);
                    break;
                }
                if (vals[id] == NULL && (vals[id] = authority_one(d, table, dflt, bonus, fn)) == NULL) {
                    Py_CLEAR(out);
                    break;
                }
                PyList_SET_ITEM(out, i, Py_NewRef(vals[id]));
            }
        } else {
            PyErr_NoMemory();
        }
        if (vals != NULL)
            for (Py_ssize_t k = 0; k < wt.count; k++) Py_XDECREF(vals[k]);
        PyMem_Free(vals);
        PyMem_Free(wt.slots);
        if (fast != -1) goto done;
    }
    memo = PyDict_New();
    out = memo == NULL ? NULL : PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *d = PyList_GET_ITEM(domains, i), *v = PyDict_GetItemWithError(memo, d);
        if (v == NULL) {
            int t = PyErr_Occurred() ? -1 : PyObject_IsTrue(d);
            v = t < 0 ? NULL : t ? PyObject_CallOneArg(fn, d) : Py_NewRef(dflt);
            if (v == NULL || PyDict_SetItem(memo, d, v) < 0) {
                Py_XDECREF(v);
                Py_CLEAR(out);
                break;
            }
            Py_DECREF(v);
        }
        PyList_SET_ITEM(out, i, Py_NewRef(v));
    }
done:
    Py_DECREF(domains);
    Py_XDECREF(memo);
    return out;
}

/* quality(hits, good) -> min(1, max(0, q) / good) per hit, 0.5 unknown; None when some q is neither None nor a
 * float (the caller computes the column in Python). */
static PyObject *quality(PyObject *self, PyObject *args) {
    PyObject *hits;
    double good;
    if (!PyArg_ParseTuple(args, "Od:quality", &hits, &good)) return NULL;
    PyObject *qs = column_of(hits, s_quality), *out = NULL;
    if (qs == NULL) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(qs);
    out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *q = PyList_GET_ITEM(qs, i), *v;
        if (q == Py_None) {
            v = Py_NewRef(unknown_half);
        } else if (PyFloat_CheckExact(q)) {
            double x = PyFloat_AS_DOUBLE(q);
            v = x >= good ? Py_NewRef(float_one) : x > 0.0 ? PyFloat_FromDouble(x / good) : Py_NewRef(float_zero);
        } else {
            Py_DECREF(out);
            out = Py_NewRef(Py_None);
            break;
        }
        if (v == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, v);
    }
    Py_DECREF(qs);
    return out;
}

/* varies(column) -> whether len(set(column)) > 1 for a column of floats (equal values, or the same object). */
static PyObject *varies(PyObject *self, PyObject *column) {
    PyObject *seq = PySequence_Fast(column, "column must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    int result = 0;
    for (Py_ssize_t i = 1; i < n && !result; i++) {
        int eq = PyObject_RichCompareBool(items[i], items[0], Py_EQ);
        if (eq < 0) {
            Py_DECREF(seq);
            return NULL;
        }
        result = !eq;
    }
    Py_DECREF(seq);
    return PyBool_FromLong(result);
}

/* ------------------------------------------------------------------ simhash */

/* fusion.simhash for ASCII texts: the words of text.casefold().translate(punctuation -> space).split() (casefold
 * is lower() for ASCII), at most 65,535 of them; a word hashed by chaining splitmix64 over its first 32 bytes as
 * four little-endian 64-bit lanes (zero-padded, as numpy's "S32" stores them); features the bigrams
 * splitmix64(a * golden ^ b), or splitmix64(a) for a one-word text; bit i set when more than half of the features
 * have it. */
static const unsigned char SH_PUNCT[128] = {
    ['!'] = 1, ['"'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['('] = 1, [')'] = 1, ['*'] = 1,
    ['+'] = 1, [','] = 1, ['-'] = 1, ['.'] = 1, ['/'] = 1, [':'] = 1, [';'] = 1, ['<'] = 1, ['='] = 1, ['>'] = 1,
    ['?'] = 1, ['@'] = 1, ['['] = 1, ['\\'] = 1, [']'] = 1, ['^'] = 1, ['_'] = 1, ['`'] = 1, ['{'] = 1, ['|'] = 1,
    ['}'] = 1, ['~'] = 1,
};
#define SH_GOLDEN 0x9E3779B97F4A7C15ULL
#define SH_MAX_WORDS 65535

static uint64_t splitmix64(uint64_t h) {
    h ^= h >> 30;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 27;
    h *= 0x94D049BB133111EBULL;
    return h ^ (h >> 31);
}

static uint64_t load_le64(const unsigned char *b) {
    uint64_t x = 0;
    for (int k = 7; k >= 0; k--) x = (x << 8) | b[k];
    return x;
}

/* The hash of the lowered word p[0:len]. */
static uint64_t sh_word(const unsigned char *p, Py_ssize_t len) {
    unsigned char buf[32] = {0};
    Py_ssize_t n = len < 32 ? len : 32;
    for (Py_ssize_t k = 0; k < n; k++) buf[k] = (unsigned char)(p[k] >= 'A' && p[k] <= 'Z' ? p[k] + 32 : p[k]);
    uint64_t h = splitmix64(load_le64(buf) ^ SH_GOLDEN);
    for (int j = 1; j < 4; j++) h = splitmix64(h ^ load_le64(buf + 8 * j));
    return h;
}

/* NIBBLE[v]: the four bits of v spread into four 16-bit counters, so that one addition counts four bits of a
 * feature (a text has fewer than 2**16 features, so no counter overflows). */
static uint64_t NIBBLE[16];

static void sh_count(uint64_t *acc, uint64_t f) {
    for (int k = 0; k < 16; k++) acc[k] += NIBBLE[(f >> (4 * k)) & 15];
}

/* SimHash of one ASCII text into *out; 0 when it has no words. */
static int sh_text(const unsigned char *p, Py_ssize_t len, uint64_t *out) {
    uint64_t acc[16] = {0}; /* bit 4k + j of the features counted in 16-bit lane j of acc[k] */
    Py_ssize_t words = 0, feats = 0, i = 0;
    uint64_t prev = 0;
    while (i < len && words < SH_MAX_WORDS) {
        while (i < len && (ascii_space(p[i]) || SH_PUNCT[p[i] & 0x7f])) i++;
        if (i == len) break;
        Py_ssize_t start = i;
        while (i < len && !ascii_space(p[i]) && !SH_PUNCT[p[i] & 0x7f]) i++;
        uint64_t h = sh_word(p + start, i - start);
        if (words++ > 0) {
            sh_count(acc, splitmix64((prev * SH_GOLDEN) ^ h));
            feats++;
        }
        prev = h;
    }
    if (words == 0) return 0;
    if (words == 1) {
        sh_count(acc, splitmix64(prev));
        feats = 1;
    }
    uint64_t sig = 0;
    for (int b = 0; b < 64; b++) {
        Py_ssize_t count = (Py_ssize_t)((acc[b >> 2] >> (16 * (b & 3))) & 0xffff);
        sig |= (uint64_t)(2 * count > feats) << b;
    }
    *out = sig;
    return 1;
}

/* simhash_ascii(texts) -> [SimHash or None per text], or None when some text is not an exact ASCII str (the
 * caller computes those with numpy). */
static PyObject *simhash_ascii(PyObject *self, PyObject *texts_in) {
    PyObject *seq = PySequence_Fast(texts_in, "texts must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **texts = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!PyUnicode_CheckExact(texts[i]) || !PyUnicode_IS_ASCII(texts[i])) {
            Py_DECREF(seq);
            Py_RETURN_NONE;
        }
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        uint64_t sig;
        PyObject *v = sh_text((const unsigned char *)PyUnicode_DATA(texts[i]), PyUnicode_GET_LENGTH(texts[i]), &sig)
                          ? PyLong_FromUnsignedLongLong(sig)
                          : Py_NewRef(Py_None);
        if (v == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, i, v);
    }
    Py_DECREF(seq);
    return out;
}

/* ------------------------------------------------------------------ module */

static PyMethodDef methods[] = {
    {"title_join", title_join, METH_VARARGS,
     "title_join(hits, t, groups, title_key) -> comparisons, or None to run the Python version"},
    {"collect_rows", collect_rows, METH_VARARGS,
     "collect_rows(lanes, lane_stages) -> (ids, reps, stages, best, rows, native)"},
    {"build_items", build_items, METH_VARARGS,
     "build_items(rows, lane_rows, lane_names, components, native, rrf, base, total, stage, hits, factors, "
     "lane_order, merged, item_type) -> items, or None"},
    {"merge_rows", merge_rows, METH_VARARGS,
     "merge_rows(rows, native, norm, ids, hits, stage, best, root, members) -> (ids, hits, stage, best, merged, "
     "lane_order, rows, native, norm)"},
    {"rrf_sums", rrf_sums, METH_VARARGS, "rrf_sums(rows, weights, n, k, lanes) -> per-row weighted RRF sums"},
    {"rank_rows", rank_rows, METH_VARARGS,
     "rank_rows(w_base, base, factors, norm, stage, best, ids, stage_first) -> (total or None, order), or None"},
    {"score_base", score_base, METH_VARARGS,
     "score_base(rows, norm, weights, n, lane_order, combmnz, ceiling) -> per-row base scores"},
    {"minmax", minmax, METH_O, "minmax(scores) -> min-max normalised scores, or None"},
    {"url_groups", url_groups, METH_VARARGS, "url_groups(hits, groups, url_key) -> [(row, long key)] or None"},
    {"sig_groups", sig_groups, METH_VARARGS,
     "sig_groups(sigs, hits, groups, max_bits, limit, norm_text) -> (comparisons, signed, unique) or None"},
    {"domain_diversity", domain_diversity, METH_O, "domain_diversity(hits) -> column"},
    {"recency", recency, METH_VARARGS, "recency(hits, edges, scores) -> column or None"},
    {"authority", authority, METH_VARARGS, "authority(hits, authority_of, default) -> column"},
    {"quality", quality, METH_VARARGS, "quality(hits, good) -> column or None"},
    {"column", column, METH_VARARGS, "[hit.<name> for hit in hits]"},
    {"varies", varies, METH_O, "varies(column) -> len(set(column)) > 1 for floats"},
    {"simhash_ascii", simhash_ascii, METH_O, "simhash_ascii(texts) -> SimHashes (None: no words), or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "fusion._kernel",
                                    "Compiled deduplication loops (see fusion/dedup.py).", -1, methods};

PyMODINIT_FUNC PyInit__kernel(void) {
    for (int v = 0; v < 16; v++)
        for (int j = 0; j < 4; j++) NIBBLE[v] |= (uint64_t)((v >> j) & 1) << (16 * j);
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL) return NULL;
    s_domain = PyUnicode_InternFromString("domain");
    s_title = PyUnicode_InternFromString("title");
    s_title_key = PyUnicode_InternFromString("title_key");
    s_parent = PyUnicode_InternFromString("parent");
    s_columns = PyUnicode_InternFromString("columns");
    s_why = PyUnicode_InternFromString("why");
    s_why_title = PyUnicode_InternFromString("title");
    s_f_hit = PyUnicode_InternFromString("hit");
    s_f_total = PyUnicode_InternFromString("score_total");
    s_f_scores = PyUnicode_InternFromString("scores");
    s_f_lanes = PyUnicode_InternFromString("lanes");
    s_f_ranks = PyUnicode_InternFromString("ranks");
    s_f_stage = PyUnicode_InternFromString("stage_priority");
    s_f_merged = PyUnicode_InternFromString("merged_ids");
    s_rrf = PyUnicode_InternFromString("rrf");
    s_fused = PyUnicode_InternFromString("fused");
    neg_inf = PyFloat_FromDouble(-INFINITY);
    if (!s_f_hit || !s_f_total || !s_f_scores || !s_f_lanes || !s_f_ranks || !s_f_stage || !s_f_merged || !s_rrf ||
        !s_fused || !neg_inf)
        return NULL;
    s_url = PyUnicode_InternFromString("url");
    s_url_key = PyUnicode_InternFromString("url_key");
    s_text = PyUnicode_InternFromString("text");
    s_why_url = PyUnicode_InternFromString("url");
    s_why_near = PyUnicode_InternFromString("near");
    s_why_content = PyUnicode_InternFromString("content");
    if (!s_url || !s_url_key || !s_text || !s_why_url || !s_why_near || !s_why_content) return NULL;
    s_published_at = PyUnicode_InternFromString("published_at");
    s_quality = PyUnicode_InternFromString("quality");
    s_keyless = PyUnicode_InternFromString("keyless");
    unknown_half = PyFloat_FromDouble(0.5);
    float_one = PyFloat_FromDouble(1.0);
    float_zero = PyFloat_FromDouble(0.0);
    if (float_one == NULL || float_zero == NULL) return NULL;
    if (!s_published_at || !s_quality || !unknown_half) return NULL;
    s_id = PyUnicode_InternFromString("id");
    s_score = PyUnicode_InternFromString("score");
    if (!s_id || !s_score || !s_domain || !s_title || !s_title_key || !s_parent || !s_why_title || !s_columns || !s_why) return NULL;
    return PyModule_Create(&module);
}
