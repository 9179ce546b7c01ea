// Package held keeps the deliveries that one streaming subscriber (a
// WebSocket connection of transports/wstransport, a Subscribe stream of
// transports/connecttransport) holds unsettled, so that both transports
// count prefetch credit, expire leases and release what is left the same
// way.
//
// A Set maps the id of each delivery sent and not yet settled to its lease
// and when that lease expires. Sending takes a credit (Hold); a delivery
// settled through the subscriber (Forget), or whose lease expired (found
// by Credit), gives it back, and Forget wakes the claim loop waiting in
// Wait. When the subscriber goes away, Release hands whatever is still
// held back for redelivery at once.
package held
