//go:build !ringflow_exchange_notxn

package kafka

// exchangeDelivery is how repartition topics are written: in
// transactions committed with the checkpoints that cover them. A build
// with the tag ringflow_exchange_notxn writes them at least once,
// without transactions, which breaks exactly-once; it exists only to
// show that the distributed test catches that.
const exchangeDelivery = ExactlyOnce
