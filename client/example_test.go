package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/delayq/delayq/client"
)

// Schedule "close order 42 in 30 minutes", then run a consumer that closes
// orders until interrupted.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	dq, err := client.New(client.Config{URL: "http://127.0.0.1:8080", Token: os.Getenv("DELAYQ_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	_, err = dq.Push(ctx, &client.PushParams{
		Topic: "orders.close",
		ID:    "close-order-42", // pushing it twice is refused: ErrConflict
		Body:  map[string]int{"order": 42},
		Delay: 30 * time.Minute,
	})
	if err != nil && !errors.Is(err, client.ErrConflict) {
		log.Fatal(err)
	}

	err = dq.Subscribe(ctx, "orders.close", &client.SubscribeParams{
		Concurrency: 4,
		HandlerFunc: func(ctx context.Context, d *client.Delivery) error {
			fmt.Printf("closing %s (attempt %d)\n", d.Body, d.Attempt)
			return nil // acked; an error would be retried
		},
	})
	if err != nil {
		log.Fatal(err)
	}
}
