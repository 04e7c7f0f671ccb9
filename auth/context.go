package auth

import "context"

type identityKey struct{}

// NewContext is ctx carrying the identity of its call (the interceptor
// that authenticated it puts it there).
func NewContext(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext is the identity of a call; nil when calls are not
// authenticated.
func FromContext(ctx context.Context) *Identity {
	id, _ := ctx.Value(identityKey{}).(*Identity)
	return id
}
