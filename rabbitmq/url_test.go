package rabbitmq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/rabbitmq"
)

// TestHostileURLsNeverShowThePassword: whatever is wrong with the URL (a
// bad port, a '#' or '"' in the password, a bad %-escape, no scheme), and
// whether it fails validation (NewPublisher) or the dial (the first call:
// NewPublisher does not dial), neither the error nor any log line contains
// the password or a piece of it. Each password is made of pieces that
// appear nowhere else, split where a parser might cut it.
func TestHostileURLsNeverShowThePassword(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		url    string
		pieces []string // of the password, each of which must never appear
	}{
		{"bad port", "amqp://guest:Hq4Wz7Pk@127.0.0.1:notaport/", []string{"Hq4Wz7Pk"}},
		{"fragment in the password, unparsable", "amqp://guest:Xy7q#Qw9z@127.0.0.1:5672/", []string{"Xy7q", "Qw9z"}},
		// url.Parse reads host "guest", port 1234 and the fragment
		// "Rt5v@127.0.0.1:1/": a valid URL that dials the wrong host.
		{"fragment in the password, parsable", "amqp://guest:1234#Rt5vKm@127.0.0.1:1/", []string{"1234#", "Rt5vKm"}},
		{"quote in the password", `amqp://guest:Kq3d"Vm8z@127.0.0.1:1/`, []string{"Kq3d", "Vm8z"}},
		{"valid escape", "amqp://guest:Pz7%41Rt8@127.0.0.1:1/", []string{"Pz7%41Rt8", "Pz7ARt8", "Pz7", "Rt8"}},
		{"invalid escape", "amqp://guest:Pz7%zzRt8@127.0.0.1:1/", []string{"Pz7", "zzRt8", "Rt8"}},
		{"missing scheme", "guest:Mn5Lk9Jh@127.0.0.1:5672/", []string{"Mn5Lk9Jh"}},
		{"missing scheme, authority only", "//guest:Bv6Nc3Ds@127.0.0.1:5672/", []string{"Bv6Nc3Ds"}},
		{"wrong scheme", "http://guest:Gf2Hj8Kl@127.0.0.1:5672/", []string{"Gf2Hj8Kl"}},
		{"at sign in the password", "amqp://guest:Ty6@Ui3o@127.0.0.1:1/", []string{"Ty6@", "Ui3o"}},
		{"slash in the password", "amqp://guest:Wq2/Er5t@127.0.0.1:1/", []string{"Wq2/", "Er5t"}},
		{"whitespace in the password", "amqp://guest:Zx8 Cv4b@127.0.0.1:1/", []string{"Zx8", "Cv4b"}},
		{"bad heartbeat", "amqp://guest:Lo9Ik7Uj@127.0.0.1:1/?heartbeat=soon", []string{"Lo9Ik7Uj"}},
		{"no scheme, slashes in the password", "guest:Op3//Nm6b@127.0.0.1:1/", []string{"Op3", "Nm6b"}},
		{"no scheme, :// in the password", "guest:Qa1://Zs2x@127.0.0.1:1/", []string{"Qa1", "Zs2x"}},
		{"refused connection", "amqp://guest:Yh5Tg4Rf@127.0.0.1:1/", []string{"Yh5Tg4Rf"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			logger := watermill.NewCaptureLogger()
			p, err := rabbitmq.NewPublisher(rabbitmq.PublisherConfig{URL: tc.url, DialTimeout: 2 * time.Second}, logger)
			if err == nil {
				t.Cleanup(func() { require.NoError(t, p.Close()) })
				require.ErrorIs(t, p.ProbeBroker(context.Background()), oncebox.ErrBrokerUnavailable)
				err = p.Publish("orders", event(0))
				require.ErrorIs(t, err, oncebox.ErrBrokerUnavailable)
			} else {
				require.Nil(t, p)
				require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
			}
			text := err.Error() + fmt.Sprintf(" %+v %#v", err, logger.Captured())
			for _, piece := range tc.pieces {
				require.NotContains(t, text, piece)
			}
			require.Contains(t, err.Error(), "URL", "the error names the input")
		})
	}
}

// TestCheckSubscriberConfigReportsAMalformedURLRedacted: watermill-amqp's
// subscriber passes amqp091-go's parse error on, URL and password
// included; CheckSubscriberConfig reports the malformed URL first, without
// the password.
func TestCheckSubscriberConfigReportsAMalformedURLRedacted(t *testing.T) {
	t.Parallel()
	w := rabbitmq.CheckSubscriberConfig(rabbitmq.RecommendedSubscriberConfig("amqp://guest:Hq4Wz7Pk@127.0.0.1:notaport/"))
	require.Len(t, w, 1)
	require.Contains(t, w[0], "Connection.AmqpURI amqp://guest:xxxxx@127.0.0.1:notaport/ has an invalid port")
	require.NotContains(t, w[0], "Hq4Wz7Pk")
	require.Empty(t, rabbitmq.CheckSubscriberConfig(rabbitmq.RecommendedSubscriberConfig("amqp://guest:guest@127.0.0.1:5672/")))
}
