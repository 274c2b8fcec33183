package redact

// matcher finds every needle in a text in one pass over it, whatever the
// number of needles: an Aho-Corasick automaton over bytes. A run may carry
// many secrets, and its answer arrives in hundreds of deltas; a loop over
// the secrets per delta made 100,000 secrets cost seconds per answer.
//
// The trie is numbered breadth-first, which puts the children of node i
// right after those of node i-1: node i's children are first[i] up to
// first[i+1], sorted by label, so no node needs its own child list and
// 100,000 secrets fit in a few flat slices.
type matcher struct {
	first []int32 // per node, its first child; one extra entry closes the last node
	label []byte  // per node, the byte on the edge into it
	fail  []int32 // per node, the node of its longest proper suffix in the trie
	depth []int32 // per node, the length of the prefix it stands for
	match []int32 // per node, the longest needle ending there (itself or a suffix), or 0
	// root is the root's child along each byte, or 0. The root's children
	// are nodes 1 to 256 at most (they are numbered first), so 16 bits
	// hold them: every run carries a matcher for as long as it waits on
	// its model, and this table is most of a small one.
	root [256]uint16
}

// newMatcher builds the automaton. needles must be sorted, distinct and
// not empty.
func newMatcher(needles []string) *matcher {
	m := &matcher{}
	m.buildTrie(needles)
	m.linkFailures()
	return m
}

// buildTrie adds the nodes breadth-first. Each node stands for the needles
// [lo, hi) sharing its prefix; since they are sorted, its children are
// runs of equal bytes at its depth. The needles are copied end to end
// first: each level then reads them front to back, where 100,000 separate
// strings would cost a cache miss each, per level.
func (m *matcher) buildTrie(needles []string) {
	n, total := trieSize(needles)
	arena := make([]byte, 0, total)
	at := make([]int32, len(needles)+1) // needle i is arena[at[i]:at[i+1]]
	for i, s := range needles {
		arena = append(arena, s...)
		at[i+1] = int32(len(arena))
	}
	type run struct{ lo, hi int32 }
	runs := make([]run, 1, n)
	runs[0] = run{0, int32(len(needles))}
	m.first = make([]int32, 0, n+1)
	m.label, m.depth, m.match = make([]byte, 1, n), make([]int32, 1, n), make([]int32, 1, n)
	for node := 0; node < len(runs); node++ {
		m.first = append(m.first, int32(len(runs)))
		lo, hi, d := runs[node].lo, runs[node].hi, m.depth[node]
		if lo < hi && at[lo+1]-at[lo] == d {
			m.match[node] = d // the shortest sorts first: it is the prefix itself
			lo++
		}
		for lo < hi {
			c := arena[at[lo]+d]
			end := lo + 1
			for end < hi && arena[at[end]+d] == c {
				end++
			}
			runs = append(runs, run{lo, end})
			m.label = append(m.label, c)
			m.depth = append(m.depth, d+1)
			m.match = append(m.match, 0)
			lo = end
		}
	}
	m.first = append(m.first, int32(len(runs)))
}

// trieSize counts the trie's nodes, and the needles' bytes: each sorted
// needle adds the nodes of its bytes past the prefix it shares with the
// one before.
func trieSize(needles []string) (nodes, total int) {
	n := 1
	for i, s := range needles {
		total += len(s)
		common := 0
		if i > 0 {
			prev := needles[i-1]
			for common < len(prev) && common < len(s) && prev[common] == s[common] {
				common++
			}
		}
		n += len(s) - common
	}
	return n, total
}

// linkFailures sets each node's failure link and inherits the matches of
// its suffixes, in breadth-first order so a shorter suffix is always done.
func (m *matcher) linkFailures() {
	m.fail = make([]int32, len(m.label))
	for c := m.first[0]; c < m.first[1]; c++ {
		m.root[m.label[c]] = uint16(c)
	}
	for node := int32(1); node < int32(len(m.label)); node++ {
		for child := m.first[node]; child < m.first[node+1]; child++ {
			f := m.step(m.fail[node], m.label[child])
			m.fail[child] = f
			m.match[child] = max(m.match[child], m.match[f])
		}
	}
}

// child returns node's child along c, or -1.
func (m *matcher) child(node int32, c byte) int32 {
	if node == 0 {
		if t := m.root[c]; t != 0 {
			return int32(t)
		}
		return -1
	}
	lo, hi := m.first[node], m.first[node+1]
	end := hi
	for lo < hi {
		mid := int32(uint32(lo+hi) >> 1)
		if m.label[mid] < c {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < end && m.label[lo] == c {
		return lo
	}
	return -1
}

// step is the automaton's transition from state s on byte c.
func (m *matcher) step(s int32, c byte) int32 {
	for {
		if t := m.child(s, c); t >= 0 {
			return t
		}
		if s == 0 {
			return 0
		}
		s = m.fail[s]
	}
}

// scan feeds text to the automaton and calls found(end, n) for every
// offset end where a needle ends, n being the longest such needle's length.
// It returns the length of the longest suffix of text[:upto] that begins a
// needle: what more text could still complete.
func (m *matcher) scan(text string, upto int, found func(end, n int)) int {
	s, depth := int32(0), 0
	for i := 0; i < len(text); i++ {
		if i == upto {
			depth = int(m.depth[s])
		}
		if s == 0 {
			if s = int32(m.root[text[i]]); s == 0 {
				continue
			}
		} else {
			s = m.step(s, text[i])
		}
		if n := m.match[s]; n > 0 {
			found(i+1, int(n))
		}
	}
	if upto >= len(text) {
		depth = int(m.depth[s])
	}
	return depth
}
