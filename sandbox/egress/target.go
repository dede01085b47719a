package egress

import "context"

type targetKey struct{}

// withTarget carries the checked target from the handler to the
// ReverseProxy hooks.
func withTarget(ctx context.Context, t target) context.Context {
	return context.WithValue(ctx, targetKey{}, t)
}

func targetFrom(ctx context.Context) (target, bool) {
	t, ok := ctx.Value(targetKey{}).(target)
	return t, ok
}
