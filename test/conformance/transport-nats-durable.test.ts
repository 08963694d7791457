/** The Transport conformance suite against JetStream (durable mode over a real nats-server). */
import { natsDurableFactory } from './transport-nats-harness.js';
import { transportConformance } from './transport.js';

transportConformance('NATS durable (JetStream)', natsDurableFactory());
