package dlq

// ProblemFor exposes problemFor to the tests.
var ProblemFor = problemFor
