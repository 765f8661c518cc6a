package mig

import "errors"

// Sentinel errors for bad input. Every error returned by this package for bad
// input wraps exactly one of these, so callers can map them to a condition
// reason with errors.Is while the message names the offending part.
var (
	// ErrUnknownModel: a GPU model or product name that the catalog lacks.
	ErrUnknownModel = errors.New("unknown GPU model")
	// ErrUnknownProfile: a profile name that the GPU model does not offer.
	ErrUnknownProfile = errors.New("unknown profile")
	// ErrSyntax: a layout or profile string that does not parse.
	ErrSyntax = errors.New("syntax error")
	// ErrInvalidLayout: a layout that parses but that the GPU cannot hold
	// (bad placement, overlap, too many instances, compute slices exhausted).
	ErrInvalidLayout = errors.New("invalid layout")
	// ErrDoesNotFit: a multiset of profiles that cannot be placed on the GPU
	// under the given constraints.
	ErrDoesNotFit = errors.New("does not fit")
)
