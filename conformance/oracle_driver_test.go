package conformance_test

// The Oracle driver for the suite's Oracle targets: internal/dbtest does not
// import it, so that the core module's tests do not require go-ora.
import _ "github.com/sijms/go-ora/v2" // registers the "oracle" driver
