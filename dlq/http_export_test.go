package dlq

import "slices"

// ProblemFor exposes problemFor to the tests.
var ProblemFor = problemFor

// Route is route, for the tests.
type Route = route

// Routes returns the endpoints of the REST handler, their paths relative to
// the base path; the OpenAPI document lists the same.
func Routes() []Route { return slices.Clone(routes) }
