export { mosquittoPath, startBroker, type TestBroker } from '../../bench/lib/broker.js';
