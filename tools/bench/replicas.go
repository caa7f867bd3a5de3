package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"
)

// Several replicas (issue 28): -fairness -replicas N and -budgets run N
// Caddys in front of the same engines, sharing through a redis-server
// the bench starts as a child, as it starts its other processes.

// startRedis starts a redis-server on a free port, keeping nothing on
// disk, and waits until it answers PING.
func (b *bench) startRedis(ctx context.Context) (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	port := ports[0]
	p, err := b.procs.start("redis-server", filepath.Join(b.work, "redis.log"), nil, "redis-server",
		"--port", strconv.Itoa(port), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1")
	if err != nil {
		return 0, err
	}
	err = poll(ctx, startTimeout, func() (bool, error) {
		select {
		case <-p.exited:
			return false, p.failure(fmt.Errorf("redis-server exited"))
		default:
		}
		return redisPing(port) == nil, nil
	})
	if err != nil {
		return 0, fmt.Errorf("redis-server on %d: %w", port, err)
	}
	return port, nil
}

// redisPing sends PING and wants +PONG.
func redisPing(port int) error {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), probeTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(probeTimeout))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING: %q", line)
	}
	return nil
}

// startReplicas starts n Caddys of the fairness run: the first spawns the
// two engines, the others list them external with max_inflight
// fairBatch; share gives them the cluster option (and a redis-server of
// their own).
func (b *bench) startReplicas(ctx context.Context, n int, share bool) (*gatedRouter, error) {
	ports, err := freePorts(fairEngines)
	if err != nil {
		return nil, err
	}
	global := ""
	if share {
		redis, err := b.startRedis(ctx)
		if err != nil {
			return nil, err
		}
		global = clusterOption(redis, n)
	}
	r := &gatedRouter{gate: share, http: newClient(256)}
	for i := range n {
		handler := mlcTenantsExternal(ports)
		if i == 0 {
			handler = mlcTenants(ports, true)
		}
		name := fmt.Sprintf("share-%s-%d", onOff(share), i)
		c, err := b.startCaddyWith(ctx, name, global, handler, false)
		if err != nil {
			return nil, err
		}
		if err := newParty(name, name, c).waitServing(ctx); err != nil {
			return nil, err
		}
		r.replicas = append(r.replicas, c)
	}
	r.caddy = r.replicas[0]
	return r, nil
}
