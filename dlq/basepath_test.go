package dlq_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dlq"
)

// BadBasePaths are base paths that http.ServeMux cannot serve, or would
// serve under another path than the one given; NewHandler must refuse each
// with an error, never a panic.
var badBasePaths = []string{
	"dlq", "/a//b", "/a/./b", "/a/../b", "/a/.", "/a/..", "/..", "/.", "//", "//dlq",
	"/a/{id}", "/{$}", "/a{", "/a}", "/a b", "/a\tb", "/a\nb", "/a\x00b", "/a%2Fb", "/a%zz",
	"/a?b", "/a#b", "/d\xffq", "/dlq/../../etc",
}

// TestNewHandlerRefusesBadBasePaths checks that every bad base path is an
// error wrapping ErrInvalidConfig that names the base path.
func TestNewHandlerRefusesBadBasePaths(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, base := range badBasePaths {
		var err error
		require.NotPanics(t, func() {
			_, err = dlq.NewHandler(dlq.HandlerConfig{Store: f.store, AllowUnauthenticatedDangerously: true, BasePath: base})
		}, "base path %q", base)
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig, "base path %q", base)
		require.ErrorContains(t, err, "BasePath", "base path %q", base)
		require.NoError(t, dlq.ValidateBasePath("/dlq"))
		require.Error(t, dlq.ValidateBasePath(base), "base path %q", base)
	}
	// Good ones are served where they say.
	for base, path := range map[string]string{
		"":                             "/dlq/events/count",
		"/":                            "/events/count",
		"/dlq/":                        "/dlq/events/count",
		"/admin/v1.2/dead_letters-x~y": "/admin/v1.2/dead_letters-x~y/events/count",
	} {
		h, err := dlq.NewHandler(dlq.HandlerConfig{Store: f.store, AllowUnauthenticatedDangerously: true, BasePath: base})
		require.NoError(t, err, "base path %q", base)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		require.Equal(t, http.StatusOK, rec.Code, "base path %q: %s", base, rec.Body.String())
	}
}
