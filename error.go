package runnel

import (
	"errors"
	"fmt"
)

// ErrorCode classifies a failure for callers; internal/server maps each code
// to one HTTP status.
type ErrorCode string

// The error codes.
const (
	CodeInvalidRequest ErrorCode = "invalid_request" // 400: the caller must fix the request
	CodeRefused        ErrorCode = "refused"         // 400: a policy or feature runnel will not run
	CodeUnauthorized   ErrorCode = "unauthorized"    // 401
	CodeTooLarge       ErrorCode = "too_large"       // 413
	CodeAtCapacity     ErrorCode = "at_capacity"     // 429
	CodeProviderError  ErrorCode = "provider_error"  // the model API failed
	CodeAgentError     ErrorCode = "agent_error"     // 502: an ACP agent crashed, hung or broke the protocol
	CodeTimeout        ErrorCode = "timeout"         // a run deadline passed
	CodeUnavailable    ErrorCode = "unavailable"     // 502: a server the run needs (a required MCP server) could not be reached
	CodeCancelled      ErrorCode = "cancelled"       // the caller went away or the server shut down
	CodeInternal       ErrorCode = "internal"        // a bug; the caller sees "internal error"
)

// Error is a failure with a code and a sentence a user can act on. Err, if
// set, is the underlying cause; it is logged, never shown to the caller.
type Error struct {
	Code    ErrorCode
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil && e.Message == "" {
		return e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with a formatted message. A %w verb wraps its
// argument as the cause.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Code: code, Message: err.Error(), Err: errors.Unwrap(err)}
}

// ErrorCodeOf returns the code of the first *Error in err's chain, or
// CodeInternal when there is none.
func ErrorCodeOf(err error) ErrorCode {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) && e.Code != "" {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the sentence for the caller: the message of the
// first *Error in err's chain, or "internal error" for anything else.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Code != CodeInternal && e.Message != "" {
		return e.Message
	}
	return "internal error"
}
