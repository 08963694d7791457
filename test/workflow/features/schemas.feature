Feature: Input And Output Schemas
  As a convoke workflow author
  I want the data schemas of my workflow and its tasks to be enforced
  So that a task never runs on, and a workflow never returns, data its schema refuses

  Scenario: Workflow Input Refused By Its Schema
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: input-schema
      version: '1.0.0'
    input:
      schema:
        format: json
        document:
          type: object
          required: [ order ]
          properties:
            order: { type: string }
    do:
      - greet:
          set:
            greeting: ${ "hello " + .order }
    """
    And given the workflow input is:
    """yaml
    order: 42
    """
    When the workflow is executed
    Then the workflow should fault with error:
    """yaml
    type: https://serverlessworkflow.io/spec/1.0.0/errors/validation
    status: 400
    instance: /
    """
    And greet should not run

  Scenario: Workflow Input Accepted By Its Schema
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: input-schema-ok
      version: '1.0.0'
    input:
      schema:
        format: json
        document:
          type: object
          required: [ order ]
          properties:
            order: { type: string }
      from: .order
    output:
      schema:
        format: json
        document: { type: string }
    do:
      - greet:
          set: ${ "hello " + . }
    """
    And given the workflow input is:
    """yaml
    order: o-1
    """
    When the workflow is executed
    Then the workflow should complete with output:
    """yaml
    hello o-1
    """

  Scenario: Workflow Output Refused By Its Schema
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: output-schema
      version: '1.0.0'
    output:
      as: .count
      schema:
        format: json
        document: { type: string }
    do:
      - count:
          set:
            count: 3
    """
    When the workflow is executed
    Then the workflow should fault with error:
    """yaml
    type: https://serverlessworkflow.io/spec/1.0.0/errors/validation
    status: 400
    instance: /
    """
    And count should complete

  Scenario: Task Input Refused Faults The Task Before It Runs
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: task-input-schema
      version: '1.0.0'
    do:
      - attempt:
          try:
            - charge:
                input:
                  schema:
                    format: json
                    document:
                      type: object
                      required: [ amount ]
                      properties:
                        amount: { type: number, minimum: 0 }
                  from: .amount
                set:
                  charged: ${ . }
          catch:
            errors:
              with:
                type: https://serverlessworkflow.io/spec/1.0.0/errors/validation
                status: 400
            as: failure
            do:
              - refuse:
                  set:
                    refused: ${ $failure.instance }
    """
    And given the workflow input is:
    """yaml
    amount: -5
    """
    When the workflow is executed
    Then the workflow should complete with output:
    """yaml
    refused: /do/0/attempt/try/0/charge
    """
    And charge should fault

  Scenario: Task Output Is Validated After Its Transformation
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: task-output-schema
      version: '1.0.0'
    do:
      - total:
          set:
            items: [ 1, 2 ]
          output:
            as: ${ .items | length }
            schema:
              format: json
              document: { type: integer, maximum: 1 }
      - after:
          set:
            never: true
    """
    When the workflow is executed
    Then the workflow should fault with error:
    """yaml
    type: https://serverlessworkflow.io/spec/1.0.0/errors/validation
    status: 400
    instance: /do/0/total
    """
    And total should fault
    And after should not run

  Scenario: A Schema That Does Not Compile Is Refused Before Anything Is Recorded
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: bad-schema
      version: '1.0.0'
    do:
      - greet:
          input:
            schema:
              format: json
              document: { type: 12 }
          set:
            greeting: hello
    """
    Then starting the workflow should be refused as invalid-input naming /do/0/greet/input/schema/document
