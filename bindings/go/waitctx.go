package qd

import "context"

// The blocking waits of qd (synchronize, a draining Close) cannot be interrupted: qd has no
// cancellation. Their context.Context forms run the wait on a goroutine of their own and return
// ctx.Err() as soon as ctx is done; the wait itself goes on in the background until the work it
// waits for completes, and its result is then dropped (a fault still shows in later calls, and
// Context.Err reports a Go callback's). Nothing is queued or cancelled by giving up.

// awaitContext runs wait on its own goroutine and returns its error, or ctx.Err() once ctx is
// done first.
func awaitContext(ctx context.Context, wait func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan error, 1) // buffered: an abandoned wait never blocks on sending
	go func() { done <- wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SynchronizeContext is Synchronize that gives up when ctx is done: it returns ctx.Err() then,
// while the synchronize goes on in the background until the stream's work completes.
func (s *Stream) SynchronizeContext(ctx context.Context) error {
	return awaitContext(ctx, s.Synchronize)
}

// SynchronizeContext is Synchronize that gives up when ctx is done: it returns ctx.Err() then,
// while the synchronize goes on in the background until the event's record completes.
func (e *Event) SynchronizeContext(ctx context.Context) error {
	return awaitContext(ctx, e.Synchronize)
}

// SynchronizeContext is Synchronize that gives up when ctx is done: it returns ctx.Err() then,
// while the synchronize goes on in the background until the context's work completes.
func (c *Context) SynchronizeContext(ctx context.Context) error {
	return awaitContext(ctx, c.Synchronize)
}

// CloseContext is Close that stops waiting when ctx is done: it returns ctx.Err() then, while
// the Close goes on in the background; the context is closed once its work has drained (a
// later Close waits for that, then returns nil). Objects of the context stay usable until then.
func (c *Context) CloseContext(ctx context.Context) error {
	return awaitContext(ctx, c.Close)
}
