package service

import (
	"fmt"
	"net/http"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/console"
)

// ConsoleHandler returns the operator's console (console.NewHandler) over
// the service's DLQ store, pool and dialect, the same store DLQHandler
// serves: cc.Store, cc.DB and cc.Dialect must be nil; cc.Logger defaults to
// the service's and cc.Clock to the service's clock. Give it the DLQ REST
// API's Authorize hook (e.g. dlq.BearerToken) and mount it beside the API;
// see docs/console.md.
func (s *Service) ConsoleHandler(cc console.Config) (http.Handler, error) {
	if cc.Store != nil || cc.DB != nil || cc.Dialect != nil {
		return nil, fmt.Errorf("%w: service: ConsoleHandler: console.Config.Store, DB and Dialect must be nil: the service gives its own", oncebox.ErrInvalidConfig)
	}
	cc.Store, cc.DB, cc.Dialect = s.store, s.db, s.dialect
	if cc.Logger == nil {
		cc.Logger = s.logger
	}
	if cc.Clock == nil {
		cc.Clock = s.clock
	}
	return console.NewHandler(cc)
}
