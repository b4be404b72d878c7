package traffic

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// request is one POST /orders to send.
type request struct {
	body        []byte
	contentType string
	invalid     bool
}

// generator makes the requests of a run, reproducibly from its seed. It is
// used by one goroutine.
type generator struct {
	rnd     *rand.Rand
	invalid float64
	n       int
}

func newGenerator(seed uint64, invalidFraction float64) *generator {
	return &generator{rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), invalid: invalidFraction}
}

type item struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

type order struct {
	CustomerID string `json:"customer_id"`
	Items      []item `json:"items"`
}

func (g *generator) validOrder() order {
	o := order{CustomerID: fmt.Sprintf("customer-%03d", g.rnd.IntN(200))}
	for range 1 + g.rnd.IntN(4) {
		o.Items = append(o.Items, item{SKU: fmt.Sprintf("SKU-%03d", 1+g.rnd.IntN(20)), Qty: 1 + g.rnd.IntN(5)})
	}
	return o
}

// mustJSON marshals the generator's own plain values, which cannot fail.
func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// invalidKinds are the mistakes the generator makes, in turn. Each must get
// a 4xx from the API.
var invalidKinds = []func(g *generator) request{
	func(g *generator) request { // no customer
		return request{body: mustJSON(map[string]any{"items": g.validOrder().Items})}
	},
	func(g *generator) request { // no items
		return request{body: mustJSON(map[string]any{"customer_id": "customer-001", "items": []item{}})}
	},
	func(g *generator) request { // quantity zero
		o := g.validOrder()
		o.Items[0].Qty = 0
		return request{body: mustJSON(o)}
	},
	func(g *generator) request { // negative quantity
		o := g.validOrder()
		o.Items[len(o.Items)-1].Qty = -3
		return request{body: mustJSON(o)}
	},
	func(g *generator) request { // malformed JSON
		b := mustJSON(g.validOrder())
		return request{body: b[:len(b)/2]}
	},
	func(*generator) request { // a misspelled field
		return request{body: []byte(`{"customer_id": "customer-001", "itmes": [{"sku": "SKU-001", "qty": 1}]}`)}
	},
	func(*generator) request { // a quantity that is not a number
		return request{body: []byte(`{"customer_id": "customer-001", "items": [{"sku": "SKU-001", "qty": "two"}]}`)}
	},
	func(*generator) request { // a bad SKU
		return request{body: []byte(`{"customer_id": "customer-001", "items": [{"sku": "` + strings.Repeat("x", 65) + `", "qty": 1}]}`)}
	},
	func(g *generator) request { // not JSON at all
		return request{body: []byte("customer_id=customer-001"), contentType: "application/x-www-form-urlencoded"}
	},
}

func (g *generator) next() request {
	g.n++
	if g.invalid > 0 && g.rnd.Float64() < g.invalid {
		r := invalidKinds[g.rnd.IntN(len(invalidKinds))](g)
		r.invalid = true
		if r.contentType == "" {
			r.contentType = "application/json"
		}
		return r
	}
	return request{body: mustJSON(g.validOrder()), contentType: "application/json"}
}
