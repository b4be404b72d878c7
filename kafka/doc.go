// Package kafka is the Kafka side of oncebox: a Publisher for the relay that
// sends a whole batch in one Sarama round trip and reports each message's
// fate (poller.BatchPublisher), the recommended producer and consumer
// configurations, and checks that warn about configurations that can lose
// or reorder events or break the inbox.
//
// The relay:
//
//	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers}, logger)
//	p, err := poller.New(db, pub, poller.Config{Dialect: pg, Oncebox: cfg}, logger)
//
// The consuming service, with watermill-kafka's subscriber and the inbox:
//
//	sub, err := kafkawm.NewSubscriber(kafka.RecommendedSubscriberConfig(brokers, "orders-service"), logger)
//
// With static membership (StaticMember), subscribe through NewSubscriber,
// which gives each topic's group member an instance id of its own:
//
//	sub, err := kafka.NewSubscriber(kafka.RecommendedSubscriberConfig(brokers, "orders-service",
//		kafka.StaticMember(os.Getenv("POD_NAME"))), logger)
//
// docs/kafka.md describes the configurations, the warnings, how messages map
// to Kafka records and how errors are classified.
package kafka
