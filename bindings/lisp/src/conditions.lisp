;;;; conditions.lisp - status codes and the KNN-ERROR condition hierarchy.

(in-package #:knn-gpgpu)

(defparameter *status-keywords*
  #(:ok :invalid-argument :nonfinite-input :host-out-of-memory :device-out-of-memory
    :no-device :device :invalid-tree :unsupported :cancelled :internal)
  "Status code -> keyword (KNN_ERR_NONFINITE_INPUT = 2 -> :NONFINITE-INPUT).")

(defun status-keyword (code)
  "Keyword of a status code; :UNKNOWN for codes this binding does not know."
  (if (and (integerp code) (< -1 code (length *status-keywords*)))
      (aref *status-keywords* code)
      :unknown))

(defun status-code (keyword)
  "Numeric status of a keyword such as :NONFINITE-INPUT."
  (or (position keyword *status-keywords*)
      (error "unknown knn_gpgpu status ~S" keyword)))

(define-condition knn-error (error)
  ((status :initarg :status :reader knn-error-status
           :documentation "Keyword: :invalid-argument, :nonfinite-input, ...")
   (code :initarg :code :reader knn-error-code :documentation "The C status code.")
   (message :initarg :message :reader knn-error-message
            :documentation "knn_last_error() text of the failed call.")
   (function-name :initarg :function :initform nil :reader knn-error-function
                  :documentation "The C function that failed."))
  (:report (lambda (c stream)
             (format stream "knn_gpgpu: KNN_ERR_~A (~D)~@[ in ~A~]: ~A"
                     (substitute #\_ #\- (string-upcase (symbol-name (knn-error-status c))))
                     (knn-error-code c) (knn-error-function c) (knn-error-message c))))
  (:documentation "A libknn_gpgpu call returned an error status."))

(define-condition knn-library-not-found (knn-error)
  ()
  (:default-initargs :status :library-not-found :code nil :function nil)
  (:report (lambda (c stream) (format stream "knn_gpgpu: ~A" (knn-error-message c))))
  (:documentation "libknn_gpgpu could not be loaded, or its major version differs from the
binding's; the message names what to install or set. No C status."))

(define-condition knn-invalid-argument (knn-error) ())
(define-condition knn-nonfinite-input (knn-error) ())
(define-condition knn-host-out-of-memory (knn-error) ())
(define-condition knn-device-out-of-memory (knn-error) ())
(define-condition knn-no-device (knn-error) ())
(define-condition knn-device-error (knn-error) ())
(define-condition knn-invalid-tree (knn-error) ())
(define-condition knn-unsupported (knn-error) ())
(define-condition knn-cancelled (knn-error) ())
(define-condition knn-internal-error (knn-error) ())

(define-condition knn-usage-error (simple-error) ()
  (:documentation "A mistake the binding catches before calling the library (shapes,
lengths, element types, closed handles). Not a KNN-ERROR: no status."))

(defun usage-error (format-control &rest args)
  (error 'knn-usage-error :format-control format-control :format-arguments args))

(defparameter *status-conditions*
  #(nil knn-invalid-argument knn-nonfinite-input knn-host-out-of-memory
    knn-device-out-of-memory knn-no-device knn-device-error knn-invalid-tree
    knn-unsupported knn-cancelled knn-internal-error))

(defun foreign-text (pointer)
  (if (cffi:null-pointer-p pointer)
      ""
      (cffi:foreign-string-to-lisp pointer :encoding :utf-8)))

(defun last-error ()
  "knn_last_error() of the calling thread."
  (foreign-text (%last-error)))

(defun status-string (code)
  "knn_status_string(code): static text for a status."
  (foreign-text (with-c-float-environment (%status-string code))))

(defun knn-version ()
  "knn_version(): MAJOR*10000 + MINOR*100 + PATCH of the loaded library."
  (with-c-float-environment (%version)))

(defun version-list ()
  "(major minor patch) of the loaded library."
  (let ((v (knn-version)))
    (list (floor v 10000) (mod (floor v 100) 100) (mod v 100))))

(defun signal-status (code function)
  "Signal the KNN-ERROR subclass for CODE, with knn_last_error() as message."
  (let ((class (or (and (< 0 code (length *status-conditions*))
                        (aref *status-conditions* code))
                   'knn-error)))
    (error class :status (status-keyword code) :code code :message (last-error)
                 :function function)))

(defmacro check-status (function form)
  "Evaluate FORM (a call returning a status) and signal a KNN-ERROR unless it is 0."
  (let ((status (gensym "STATUS")))
    `(let ((,status (with-c-float-environment ,form)))
       (unless (zerop ,status)
         (signal-status ,status ,function))
       (values))))
