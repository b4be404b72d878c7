//go:build !unix

package oncebox_test

import "testing"

func makeFIFO(*testing.T) (string, bool) { return "", false }
