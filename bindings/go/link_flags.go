//go:build qd_nopkgconfig

package qd

// Built with -tags qd_nopkgconfig: libqd is found through CGO_CFLAGS and CGO_LDFLAGS alone, for
// example CGO_CFLAGS=-I<repo>/include CGO_LDFLAGS='-L<build>/src -Wl,-rpath,<build>/src'.

// #cgo LDFLAGS: -lqd
import "C"
