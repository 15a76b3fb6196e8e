//go:build ringflow_exchange_notxn

package kafka

// exchangeDelivery is AtLeastOnce in this build, which exists only to
// show that the distributed test fails without transactions on the
// repartition topics: see exchange_mode.go.
const exchangeDelivery = AtLeastOnce
