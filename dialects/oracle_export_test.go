package dialects

// EventInsertColumnsForTest is the column list of EventsInsert, for the
// external tests.
const EventInsertColumnsForTest = eventInsertColumns
