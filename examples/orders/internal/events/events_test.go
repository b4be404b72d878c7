package events

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
)

func TestWithTopicCopiesTheConfiguration(t *testing.T) {
	cfg := oncebox.Config{Outbox: oncebox.OutboxConfig{Events: map[string]oncebox.EventSettings{
		OrderCreatedType: {Topic: "orders", BatchSize: 50}}}}.WithDefaults()
	other := WithTopic(cfg, "orders_x")
	got, err := Topic(other)
	require.NoError(t, err)
	require.Equal(t, "orders_x", got)
	require.Equal(t, 50, other.Outbox.Events[OrderCreatedType].BatchSize, "the other settings stay")
	got, err = Topic(cfg)
	require.NoError(t, err)
	require.Equal(t, "orders", got, "the original is not modified")
	require.Equal(t, cfg, WithTopic(cfg, ""))
}

func TestTopicOfAConfigurationWithoutTheEvent(t *testing.T) {
	cfg := oncebox.Config{Outbox: oncebox.OutboxConfig{Events: map[string]oncebox.EventSettings{"other": {}}, StrictEventTypes: true}}
	_, err := Topic(cfg)
	require.ErrorIs(t, err, oncebox.ErrUnknownEventType)
}

func TestValidate(t *testing.T) {
	ok := OrderCreated{OrderID: "01a22ab6-e849-7029-865b-121f2adc9f33", Items: []Item{{SKU: "A", Qty: 1}}}
	require.NoError(t, ok.Validate())
	for _, bad := range []OrderCreated{
		{OrderID: "poison-1", Items: ok.Items},
		{OrderID: ok.OrderID},
		{OrderID: ok.OrderID, Items: []Item{{SKU: "", Qty: 1}}},
		{OrderID: ok.OrderID, Items: []Item{{SKU: "A", Qty: 0}}},
	} {
		require.Error(t, bad.Validate(), "%+v", bad)
	}
}
