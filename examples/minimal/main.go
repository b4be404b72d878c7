// Command minimal is a whole service on oncebox: an HTTP endpoint that
// writes an order and its event in one transaction, the relay to RabbitMQ, a
// consumer with the inbox and the poison queue, the DLQ REST API, metrics
// and the inbox clean-up, all from oncebox.yaml through service.New.
//
//	go run ./examples/minimal   # DATABASE_URL, AMQP_URL, HTTP_ADDR, DLQ_TOKEN
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	amqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dlq"
	"github.com/oncebox/watermill-oncebox/metrics"
	"github.com/oncebox/watermill-oncebox/middleware"
	"github.com/oncebox/watermill-oncebox/publisher"
	"github.com/oncebox/watermill-oncebox/rabbitmq"
	"github.com/oncebox/watermill-oncebox/service"
)

func main() {
	cfg, err := oncebox.LoadConfigFile(env("ONCEBOX_CONFIG", "examples/minimal/oncebox.yaml"))
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		var ln net.Listener
		if ln, err = net.Listen("tcp", env("HTTP_ADDR", "127.0.0.1:8080")); err == nil {
			err = run(ctx, cfg, env("DATABASE_URL", "postgres://root@127.0.0.1:5432/test"),
				env("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"), ln)
		}
	}
	if err != nil {
		println("minimal:", err.Error())
		os.Exit(1)
	}
}

// run is the service: the pool, the broker's publisher and subscriber,
// oncebox, the router and the HTTP endpoints; svc.Run runs them all.
func run(ctx context.Context, cfg oncebox.Config, dbURL, amqpURL string, ln net.Listener) error {
	logger := watermill.NewSlogLogger(nil)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	reg := prometheus.NewRegistry()
	hooks, err := metrics.NewServiceHooks(reg)
	if err != nil {
		return err
	}
	out, err := rabbitmq.NewPublisher(rabbitmq.PublisherConfig{URL: amqpURL}, logger)
	if err != nil {
		return err
	}
	defer out.Close()
	subCfg := rabbitmq.RecommendedSubscriberConfig(amqpURL)
	sub, err := amqp.NewSubscriber(subCfg, logger) // the router closes it
	if err != nil {
		return err
	}
	router, err := message.NewRouter(message.RouterConfig{}, logger)
	if err != nil {
		return err
	}
	svc, err := service.New(wsql.BeginnerFromPgx(pool), cfg, logger, service.WithRelay(out), service.WithRouter(router),
		service.WithHooks(hooks), service.WithSourceCheck(rabbitmq.CheckSubscriberConfig(subCfg)))
	if err != nil {
		return err
	}
	if err := svc.Migrate(ctx); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, fmt.Sprintf(businessTables, cfg.Tables.Schema)); err != nil {
		return err
	}
	router.AddMiddleware(svc.Middleware)        // poison queue → retry → inbox, from inbox.*
	ordersTopic, _ := cfg.Event("order-placed") // an error only with outbox.strict-event-types and an unlisted type
	router.AddConsumerHandler("ship-order", ordersTopic.Topic, sub, ship(cfg.Tables.Schema))
	auth, err := dlq.BearerToken(env("DLQ_TOKEN", "change-me"))
	if err != nil {
		return err
	}
	dlqAPI, err := svc.DLQHandler(dlq.HandlerConfig{Authorize: auth})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/dlq/", dlqAPI)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("POST /orders", placeOrder(pool, svc))
	svc.Go(serve(&http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln))
	return svc.Run(ctx) // the router; once it has subscribed, the relay, DLQ jobs, inbox clean-up
}

// serve runs srv on ln under the service's lifecycle (service.Go).
func serve(srv *http.Server, ln net.Listener) func(context.Context) error {
	return func(ctx context.Context) error {
		context.AfterFunc(ctx, func() { _ = srv.Close() })
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

// businessTables are the service's own tables, beside oncebox's.
const businessTables = `CREATE TABLE IF NOT EXISTS %[1]s.orders (id bigserial PRIMARY KEY);
CREATE TABLE IF NOT EXISTS %[1]s.shipments (event_id uuid NOT NULL)`

// placeOrder writes the order and its event in one transaction.
func placeOrder(pool *pgxpool.Pool, svc *service.Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := pgx.BeginFunc(r.Context(), pool, func(tx pgx.Tx) error {
			var id int64
			if err := tx.QueryRow(r.Context(), "INSERT INTO "+svc.Config().Tables.Schema+".orders DEFAULT VALUES RETURNING id").Scan(&id); err != nil {
				return err
			}
			pub, err := svc.Publisher(wsql.TxFromPgx(tx))
			if err != nil {
				return err
			}
			_, err = publisher.PublishJSON(r.Context(), pub, "order-placed", map[string]int64{"order_id": id})
			return err
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
}

// ship records a shipment in the inbox's transaction: the effect and the
// event id commit together, so a redelivered event ships nothing twice.
func ship(schema string) message.NoPublishHandlerFunc {
	return func(msg *message.Message) error {
		tx, _ := middleware.PgxTxFromContext(msg.Context())
		_, err := tx.Exec(msg.Context(), "INSERT INTO "+schema+".shipments (event_id) VALUES ($1)",
			msg.Metadata.Get(oncebox.HeaderEventID))
		return err
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
