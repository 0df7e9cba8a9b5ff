package qd

import "testing"

// B8 (../shared/BENCHMARKS.md): a no-op qd call through the package costs at most a bare cgo
// call of the same C function + 20 ns. Both benchmarks query an idle stream (QD_SUCCESS); run
// them side by side: go test -run '^$' -bench StreamQuery -count 10 .

func idleStream(b *testing.B) *Stream {
	ctx, err := NewContext(ContextOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ctx.Close() })
	s, err := ctx.NewStream(StreamOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func BenchmarkStreamQuery_BareCgo(b *testing.B) {
	h := idleStream(b).Handle()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if bareStreamQuery(h) != 0 {
			b.Fatal("qd_stream_query failed on an idle stream")
		}
	}
}

func BenchmarkStreamQuery_Package(b *testing.B) {
	s := idleStream(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if done, err := s.Query(); !done || err != nil {
			b.Fatal("Query failed on an idle stream:", err)
		}
	}
}
