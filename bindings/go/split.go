package qd

// #include "qdgo.h"
import "C"

import "runtime"

// Split makes contexts over disjoint sets of this context's execution units, counts[i] for
// part i (qd_context_split; qd.h "SM partitions"): CUDA SMs (green contexts; each count at
// least DeviceInfo.SplitMinimum and a multiple of DeviceInfo.SplitGranularity), CPU worker
// threads (this context's worker count plays the SM count). All or nothing. Each part is a
// full Context with this one's backend and validation mode, closed on its own; either may be
// closed first.
//
// Errors: ErrInvalidArgument (no counts, a count of 0, more units than the context has, a
// count the split rule refuses: the message names it), ErrInvalidOperation (c is itself a
// part), ErrNotSupported (HIP, CUDA before 12.4).
func (c *Context) Split(counts []uint32) ([]*Context, error) {
	h, err := c.handle()
	if err != nil {
		return nil, err
	}
	if len(counts) == 0 || len(counts) > C.QD_MAX_SPLIT_PARTS {
		return nil, newError(StatusInvalidArgument, "a split of %d parts: it makes 1 to %d",
			len(counts), C.QD_MAX_SPLIT_PARTS)
	}
	in := make([]C.uint32_t, len(counts))
	for i, n := range counts {
		in[i] = C.uint32_t(n)
	}
	raws := make([]C.qd_context, len(counts))
	err = resultError(C.gq_context_split(h, &in[0], C.uint32_t(len(counts)), &raws[0]))
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	parts := make([]*Context, len(raws))
	for i, raw := range raws {
		if c.failMode {
			// The part validates as the parent does: its hazards come back as errors too.
			if err := resultError(C.gq_context_reset_hazard_handler(raw, 1)); err != nil {
				for _, r := range raws {
					C.qd_context_destroy(r)
				}
				return nil, err
			}
		}
		p := &Context{backend: c.backend, failMode: c.failMode}
		p.h.Store(uint64(raw))
		parts[i] = p
	}
	return parts, nil
}
