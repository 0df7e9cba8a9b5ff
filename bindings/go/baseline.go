package qd

// #include "qdgo.h"
import "C"

// bareStreamQuery calls qd_stream_query directly through cgo, without the package's wrapper,
// closed check or error translation: the baseline of benchmark B8 (bench_test.go).
func bareStreamQuery(h uint64) int32 { return int32(C.qd_stream_query(C.qd_stream(h))) }
