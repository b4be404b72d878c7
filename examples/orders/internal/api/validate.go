package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/oncebox/watermill-oncebox/examples/orders/internal/events"
)

// Limits of a new order.
const (
	MaxBodyBytes      = 64 << 10 // 64 KiB
	MaxCustomerIDLen  = 64
	MaxItems          = 100
	MaxSKULen         = 64
	MaxQty            = 1000
	maxReportedErrors = 20
)

var skuRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// NewOrder is the body of POST /orders. Pointers tell a missing field from
// a zero one, so that the error can say which.
type NewOrder struct {
	CustomerID *string   `json:"customer_id"`
	Items      []NewItem `json:"items"`
}

// NewItem is one line of a NewOrder.
type NewItem struct {
	SKU *string `json:"sku"`
	Qty *int    `json:"qty"`
}

// FieldError names a field of the request and what is wrong with it.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is "field: message".
func (e FieldError) Error() string { return e.Field + ": " + e.Message }

// errTooLarge is returned by DecodeOrder for a body over MaxBodyBytes.
var errTooLarge = errors.New("body too large")

// DecodeOrder reads one JSON object from r and validates it. It returns the
// order's customer and items, or the list of problems, each naming its
// field (customer_id, items[2].qty, body). Unknown fields are refused, so a
// misspelled field is not silently ignored.
func DecodeOrder(r io.Reader) (customerID string, items []events.Item, problems []FieldError, err error) {
	var in NewOrder
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		if tooLarge(err) {
			return "", nil, nil, errTooLarge
		}
		fe, ok := decodeProblem(err)
		if !ok {
			return "", nil, nil, err
		}
		problems := []FieldError{fe}
		if fe.Field != "body" {
			// A wrong type or an unknown field does not stop the decoder:
			// report the other fields' problems too, but not the field
			// already reported (its value was not decoded).
			for _, p := range in.validate() {
				if withoutIndexes(p.Field) != fe.Field && len(problems) < maxReportedErrors {
					problems = append(problems, p)
				}
			}
		}
		return "", nil, problems, nil
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if tooLarge(err) {
			return "", nil, nil, errTooLarge
		}
		return "", nil, []FieldError{{Field: "body", Message: "must hold a single JSON object, found more after it"}}, nil
	}
	if problems := in.validate(); len(problems) > 0 {
		return "", nil, problems, nil
	}
	items = make([]events.Item, len(in.Items))
	for i, it := range in.Items {
		items[i] = events.Item{SKU: *it.SKU, Qty: *it.Qty}
	}
	return strings.TrimSpace(*in.CustomerID), items, nil, nil
}

// withoutIndexes turns items[2].qty into items.qty, the form of
// json.UnmarshalTypeError.Field.
func withoutIndexes(field string) string {
	var b strings.Builder
	depth := 0
	for _, r := range field {
		switch {
		case r == '[':
			depth++
		case r == ']':
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func tooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// decodeProblem turns a decoding error about the request into a
// FieldError; other errors (the connection broke) are not the client's
// input and are returned as they are.
func decodeProblem(err error) (FieldError, bool) {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return FieldError{"body", "is empty; send a JSON object such as {\"customer_id\": \"c-1\", \"items\": [{\"sku\": \"SKU-1\", \"qty\": 1}]}"}, true
	case errors.Is(err, io.ErrUnexpectedEOF):
		return FieldError{"body", "is truncated JSON"}, true
	case errors.As(err, &syn):
		return FieldError{"body", fmt.Sprintf("is not valid JSON (at byte %d: %v)", syn.Offset, syn)}, true
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return FieldError{"body", fmt.Sprintf("must be a JSON object, not %s", typ.Value)}, true
		}
		return FieldError{field, fmt.Sprintf("must be %s, not %s", describe(typ.Type.String()), typ.Value)}, true
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return FieldError{strings.Trim(name, `"`), "is not a field of an order (fields: customer_id, items[].sku, items[].qty)"}, true
	}
	return FieldError{}, false
}

func describe(goType string) string {
	switch strings.TrimPrefix(goType, "*") {
	case "int":
		return "an integer"
	case "string":
		return "a string"
	case "[]api.NewItem":
		return "an array of items"
	case "api.NewItem":
		return "an object with sku and qty"
	}
	return "of another type"
}

func (o NewOrder) validate() []FieldError {
	var errs []FieldError
	add := func(field, format string, args ...any) {
		if len(errs) < maxReportedErrors {
			errs = append(errs, FieldError{field, fmt.Sprintf(format, args...)})
		}
	}
	switch {
	case o.CustomerID == nil:
		add("customer_id", "is required")
	case strings.TrimSpace(*o.CustomerID) == "":
		add("customer_id", "must not be empty")
	case len(*o.CustomerID) > MaxCustomerIDLen:
		add("customer_id", "must be at most %d bytes, got %d", MaxCustomerIDLen, len(*o.CustomerID))
	case !printable(*o.CustomerID):
		add("customer_id", "must be printable UTF-8 text")
	}
	switch {
	case o.Items == nil:
		add("items", "is required: an array of {\"sku\", \"qty\"}")
	case len(o.Items) == 0:
		add("items", "must hold at least one item")
	case len(o.Items) > MaxItems:
		add("items", "must hold at most %d items, got %d", MaxItems, len(o.Items))
	}
	for i, it := range o.Items {
		if i >= MaxItems {
			break
		}
		f := fmt.Sprintf("items[%d]", i)
		switch {
		case it.SKU == nil:
			add(f+".sku", "is required")
		case *it.SKU == "":
			add(f+".sku", "must not be empty")
		case len(*it.SKU) > MaxSKULen:
			add(f+".sku", "must be at most %d characters, got %d", MaxSKULen, len(*it.SKU))
		case !skuRE.MatchString(*it.SKU):
			add(f+".sku", "must be letters, digits, '.', '_' or '-', starting with a letter or digit")
		}
		switch {
		case it.Qty == nil:
			add(f+".qty", "is required")
		case *it.Qty < 1 || *it.Qty > MaxQty:
			add(f+".qty", "must be between 1 and %d, got %d", MaxQty, *it.Qty)
		}
	}
	return errs
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
