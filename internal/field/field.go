// Package field is how libraries say which configuration field is at fault:
// by its JSON name (as in config.json), never by a command-line flag, which
// only cmd/ knows and maps the field to.
package field

import (
	"errors"
	"fmt"
	"math"

	"github.com/micrograph/micrograph/internal/inputfile"
)

// Error is a setting that cannot work: the field's dotted JSON name (such as
// "model.encoder.hidden"), the value it holds and what is wrong with it,
// worded to follow them ("must be positive"): "model.encoder.hidden 0 must
// be positive", or with the flag in its place, "--hidden 0 must be positive".
type Error struct {
	Name   string
	Value  any
	Reason string
	err    error // what Reason wraps (%w), for errors.Is and errors.As
}

func (e *Error) Error() string { return fmt.Sprintf("%s %s %s", e.Name, Format(e.Value), e.Reason) }

// Unwrap is the error the reason wraps, if any: a layer above can tell the
// failure and add what only it knows (the command that fixes it).
func (e *Error) Unwrap() error { return e.err }

// Errorf is an *Error for field name holding value; like fmt.Errorf, a %w
// in format wraps its argument.
func Errorf(name string, value any, format string, args ...any) error {
	reason := fmt.Errorf(format, args...)
	return &Error{Name: name, Value: value, Reason: reason.Error(), err: errors.Unwrap(reason)}
}

// Format writes a value as a user would type it: strings quoted (whole up
// to 256 bytes, such as a path; a longer one, read from a file, shortened:
// inputfile.QuoteValue), floats in their shortest form.
func Format(v any) string {
	switch x := v.(type) {
	case string:
		return inputfile.QuoteValue(x)
	case float64:
		return fmt.Sprintf("%g", x)
	case float32:
		return fmt.Sprintf("%g", x)
	}
	return fmt.Sprint(v)
}

// Within names err's field inside the struct field prefix
// ("encoder" + "hidden" → "encoder.hidden"); other errors pass unchanged.
func Within(prefix string, err error) error {
	var fe *Error
	if !errors.As(err, &fe) {
		return err
	}
	return &Error{Name: prefix + "." + fe.Name, Value: fe.Value, Reason: fe.Reason, err: fe.err}
}

// Check names the field of a value whose check failed with err, err's
// message being the reason; a nil err passes.
func Check(name string, value any, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Name: name, Value: value, Reason: err.Error(), err: err}
}

// Finite is an error for a float field holding NaN or ±Inf, which no
// setting accepts.
func Finite(name string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return Errorf(name, v, "must be a finite number")
	}
	return nil
}

// First returns the first non-nil error, so that validations read as a list.
func First(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// InFile is err, about the content of the file at path, as an error naming
// the file that is no longer an *Error: a setting read from a file is that
// file's fault, and cmd/ maps field errors, and only them, to the flags
// that set them (a value edited into config.json must not be reported as a
// flag nobody gave).
func InFile(path string, err error) error {
	if err == nil {
		return nil
	}
	return errors.New(path + ": " + err.Error())
}

// Note adds note to the reason of err's field ("… must be positive" →
// "… must be positive; note"), for a caller that knows the circumstance
// the field was checked in; other errors pass unchanged.
func Note(err error, note string) error {
	var fe *Error
	if !errors.As(err, &fe) {
		return err
	}
	return &Error{Name: fe.Name, Value: fe.Value, Reason: fe.Reason + "; " + note, err: fe.err}
}
