package policy

// Test-only views of the policy's lists, for the model test; compiled into this package for
// its tests only, never into the production binary.

// LowerOrder returns EvictLower's candidates, least recently used first, ignoring pins.
func (p *Policy) LowerOrder() []ID {
	var ids []ID
	for e := p.lowerLRU.front(); e != nil; e = p.lowerLRU.next(e) {
		ids = append(ids, e.ID)
	}
	return ids
}

// Order returns the DRAM candidates in victim order (probation oldest first, then protected
// least recent first), ignoring readers and soft pins.
func (p *Policy) Order() []ID {
	var ids []ID
	for _, l := range []*list{&p.probation, &p.protected} {
		for e := l.front(); e != nil; e = l.next(e) {
			ids = append(ids, e.ID)
		}
	}
	return ids
}
