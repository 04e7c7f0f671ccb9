package model

import (
	"errors"
	"fmt"
)

// FieldError reports an invalid input field: which one, the value given and
// what is allowed. Its message is meant to be shown to users as is.
type FieldError struct {
	Field   string // the field as users spell it, e.g. "nodes" or "walltime"
	Value   string // the value given, quoted in the message
	Allowed string // what would have been accepted
}

func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("invalid %s: allowed %s", e.Field, e.Allowed)
	}
	return fmt.Sprintf("invalid %s %s: allowed %s", e.Field, Quote(e.Value), e.Allowed)
}

// IsFieldError reports whether err (or anything it wraps) is a *FieldError.
func IsFieldError(err error) bool {
	var fe *FieldError
	return errors.As(err, &fe)
}

func fieldErr(field, value, allowed string) error {
	return &FieldError{Field: field, Value: value, Allowed: allowed}
}
