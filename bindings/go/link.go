//go:build !qd_nopkgconfig

package qd

// libqd is found with pkg-config (package "qd"). For an installed libqd that is qd.pc; for a
// build tree, put <build>/meson-uninstalled on PKG_CONFIG_PATH (pkg-config then prefers
// qd-uninstalled.pc) and add -Wl,-rpath,<build>/src to CGO_LDFLAGS. Without pkg-config, build
// with -tags qd_nopkgconfig (link_flags.go). bindings/go/test sets all of this up.

// #cgo pkg-config: qd
import "C"
